// The tensor-parallel terms of the layout cost model (plan/layout_cost.h): which collectives a
// micro-batch waits for, with and without sequence parallelism, and what the column-parallel
// backward hides behind its GEMMs on GPUs (model/column_parallel.h runs them so); the activations one
// tensor rank keeps without sequence parallelism (Korthikanti et al. 2022, Table 2); and
// dist.sequence_parallel reaching the search.
#include <gtest/gtest.h>

#include "hwtrain/hw/hardware_preset.h"
#include "hwtrain/plan/layout_cost.h"
#include "hwtrain/run/run_bindings.h"

namespace hwt {
namespace layout_cost_test {
namespace {

// One stage (pp 1) of a GPT of `layers` blocks, width 1024, sequence 2048, TP t, micro-batch 1, fp32,
// collectives without latency: the TP time is then bytes over the link only, in units of one
// all-gather (H = (t - 1) / t of a micro-batch's activation over the link).
LayoutProblem problem(int64_t layers, bool sequence_parallel, double peak_flops) {
  LayoutProblem p;
  p.base.model.n_layer = layers;
  p.base.model.n_head = 8;
  p.base.model.n_embd = 1024;
  p.base.model.block_size = 2048;
  p.base.model.vocab_size = 32768;
  p.base.precision = Precision::Fp32;
  p.base.on_gpu = true;
  p.machine.num_gpus = 8;
  p.machine.gpus_per_node = 8;
  p.machine.peak_flops = peak_flops;
  p.machine.nvlink_gbs = 100;
  p.machine.collective_latency_s = 0;
  p.machine.memory_budget_bytes = 1e12;
  p.global_batch = 8;
  p.sequence_parallel = sequence_parallel;
  return p;
}

ParallelLayout layout(int64_t t) {
  ParallelLayout l;
  l.tensor_parallel = t;
  l.data_parallel = 8 / t;
  l.micro_batch_size = 1;
  l.num_micro_batches = 8 / l.data_parallel;
  return l;
}

double tensor_seconds(int64_t layers, bool sequence_parallel, double peak_flops, int64_t t = 2) {
  const ParallelLayout l = layout(t);
  return predict_layout(problem(layers, sequence_parallel, peak_flops), l).time.tensor_comm /
         static_cast<double>(l.num_micro_batches);
}

// With GEMMs that take no time nothing is hidden; with GEMMs far longer than any collective the
// column-parallel backward's collectives are hidden whole. Counted per block (n blocks) and head:
//  - sequence parallel: forward 4 (all-gather, reduce-scatter per sublayer), backward 2 waited for
//    (the row-parallel output gradients' all-gathers) + 4 hidden (each column group's input
//    all-gather and gradient reduce-scatter); the head 1 in forward + 2 hidden; the embedding's
//    reduce-scatter and its gradient's all-gather: 10n + 5 -> 6n + 3.
//  - without: forward 2 all-reduces (2H each), backward 2 all-reduces hidden; the head's one
//    all-reduce hidden; the embedding's all-reduce: 8n + 4 -> 4n + 2, in H.
TEST(LayoutCostTensorComm, TheColumnParallelBackwardHidesItsCollectivesBehindItsGemms) {
  const double instant = 1e30, slow = 1e6;
  for (int64_t n : {2, 6}) {
    const double sp_exposed = tensor_seconds(n, true, instant), sp_hidden = tensor_seconds(n, true, slow);
    EXPECT_NEAR(sp_hidden / sp_exposed, (6.0 * n + 3.0) / (10.0 * n + 5.0), 1e-9) << n;
    const double ar_exposed = tensor_seconds(n, false, instant), ar_hidden = tensor_seconds(n, false, slow);
    EXPECT_NEAR(ar_hidden / ar_exposed, (4.0 * n + 2.0) / (8.0 * n + 4.0), 1e-9) << n;
    // An all-reduce is an all-gather and a reduce-scatter; sequence parallelism adds the backward's
    // re-gather of the saved input slice, and its embedding's gradient all-gather.
    EXPECT_NEAR(sp_exposed / ar_exposed, (10.0 * n + 5.0) / (8.0 * n + 4.0), 1e-9) << n;
  }
  // CPU processes (Gloo shares the cores with the GEMMs) hide nothing.
  LayoutProblem cpu = problem(4, true, 1e6);
  cpu.machine.hides_collectives = false;
  const ParallelLayout two = layout(2);
  EXPECT_NEAR(predict_layout(cpu, two).time.tensor_comm / static_cast<double>(two.num_micro_batches),
              tensor_seconds(4, true, 1e30), 1e-12);
  // In between, a collective shows by what exceeds its GEMM: more than when hidden, less than all.
  const double mid = tensor_seconds(4, true, 4e14);  // GEMMs about half an all-gather long
  EXPECT_GT(mid, tensor_seconds(4, true, 1e6));
  EXPECT_LT(mid, tensor_seconds(4, true, 1e30));
}

// Recomputing every block pays each block's forward collectives again (never hidden).
TEST(LayoutCostTensorComm, RecomputedBlocksRepeatTheirForwardCollectives) {
  LayoutProblem p = problem(4, true, 1e30);
  ParallelLayout l = layout(2), recomputed = l;
  recomputed.checkpoint_every = 1;
  const double plain = predict_layout(p, l).time.tensor_comm, again = predict_layout(p, recomputed).time.tensor_comm;
  EXPECT_NEAR(again / plain, (10.0 * 4 + 5.0 + 4.0 * 4) / (10.0 * 4 + 5.0), 1e-9);
}

// A tensor rank keeps 1 / t of the activations (attention's aside) with sequence parallelism; without
// it, (10 + 24 / t) / 34 of the blocks' saved activations and the whole residual stream (the
// recomputed blocks' inputs, backward's transients), with and without recomputation.
TEST(LayoutCostMemory, WithoutSequenceParallelismTheNormsAndTheResidualStreamStayWhole) {
  for (int64_t every : {0, 1}) {
    for (int64_t t : {2, 8}) {
      ParallelLayout l = layout(t);
      l.checkpoint_every = every;
      MemoryQuery q = problem(4, true, 1e15).base;  // the memory model's query for the layout (p = 1)
      q.micro_batch_size = 1;
      q.checkpoint_every = every;
      q.world_size = l.data_parallel;
      const double all = estimate_memory(q).activations, stream = residual_stream_activation_bytes(q);
      const double with = predict_layout(problem(4, true, 1e15), l).memory.activations;
      const double without = predict_layout(problem(4, false, 1e15), l).memory.activations;
      const double n = static_cast<double>(t);
      EXPECT_NEAR(with, all / n, 1e-6 * with) << t << ", every " << every;
      EXPECT_NEAR(without, (all - stream) * (10.0 + 24.0 / n) / 34.0 + stream, 1e-6 * without) << t << ", every " << every;
      EXPECT_GT(stream, 0.0);
    }
  }
}

// dist.sequence_parallel reaches the plan's layout: a TP 8 plan predicts more memory per GPU without it.
TEST(LayoutCostMemory, DistSequenceParallelReachesTheSearch) {
  RunConfig c;
  EXPECT_TRUE(plan_intent(c).sequence_parallel);
  c.apply_override("model.preset=llama-2-7b");
  c.apply_override("dist.tensor_parallel=8");
  PlanContext ctx;
  ctx.world_size = 8;
  ctx.paper = true;
  const HardwareProfile hw = *hardware_preset("h100-80gb", 8);
  const Plan with = make_plan(hw, c, ctx);
  c.apply_override("dist.sequence_parallel=false");
  EXPECT_FALSE(plan_intent(c).sequence_parallel);
  const Plan without = make_plan(hw, c, ctx);
  ASSERT_TRUE(with.layout && without.layout);
  EXPECT_EQ(with.layout->tensor_parallel, 8);
  EXPECT_GT(without.layout->predicted_peak_bytes, with.layout->predicted_peak_bytes);
}

}  // namespace
}  // namespace layout_cost_test
}  // namespace hwt
