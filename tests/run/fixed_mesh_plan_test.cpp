// A mesh fixed before planning (dist.tensor_parallel, pipeline_parallel and pipeline_chunks all
// set, as a launched run or `hwtrain plan` with every size set hands it over: PlanContext's
// model_parallel > 1) is planned by the whole-model decisions with each rank's memory of the split
// (plan/decisions.h's rank_memory): the stage that needs the most, as the layout search predicts it.
// So a model too big for one rank fits the mesh that cuts it, the run's batch arithmetic is kept,
// and the memory agrees with the search's for the same layout.
#include <gtest/gtest.h>

#include "hwtrain/hw/hardware_preset.h"
#include "hwtrain/plan/memory_model.h"
#include "hwtrain/plan/parallel_layout.h"
#include "hwtrain/run/run_bindings.h"
#include "run/planner_machines.h"

namespace hwt {
namespace fixed_mesh_plan {

using planner_machines::cpu_box;
using planner_machines::decision;

RunConfig tiny(const std::vector<std::string>& more) {
  RunConfig c;
  for (const char* o : {"model.preset=tiny", "model.n_layer=4", "model.n_embd=256", "model.n_head=4",
                        "model.block_size=128", "optimization.mixed_precision_dtype=fp32", "dist.pipeline_chunks=1"}) {
    c.apply_override(o);
  }
  c.model.vocab_size = 320;
  for (const auto& o : more) c.apply_override(o);
  return c;
}

// One replica of `tp` x `pp` ranks on one machine, as cli/parallel_setup.h describes a fixed mesh.
PlanContext mesh(int64_t tp, int64_t pp, int64_t dp = 1) {
  PlanContext ctx;
  ctx.world_size = dp;
  ctx.model_parallel = tp * pp;
  ctx.pipeline_parallel = pp;
  ctx.ranks_per_node = static_cast<int>(tp * pp * dp);
  return ctx;
}

// The least the whole model needs on a rank: micro-batch 1, every block recomputed.
double whole_model_least(const RunConfig& c) {
  MemoryQuery q;
  q.model = c.model;
  q.checkpoint_every = 1;
  return estimate_memory(q).total();
}

// A machine whose two processes each get 3/4 of half its memory: under what the whole model needs
// at its smallest step (the whole-model decisions refuse it), over what a tensor pair's rank needs.
TEST(FixedMeshPlan, AModelTooBigForOneRankFitsTheTensorPairThatCutsIt) {
  const RunConfig c = tiny({"dist.tensor_parallel=2", "dist.pipeline_parallel=1", "dist.sharding=none",
                            "train.micro_batch_size=2", "train.grad_accum_steps=3"});
  const HardwareProfile hw = cpu_box(static_cast<int64_t>(2 * whole_model_least(c)));
  EXPECT_THROW(make_plan(hw, c, mesh(1, 1, 2)), HardwareError);  // two replicas: each whole
  const Plan p = make_plan(hw, c, mesh(2, 1));
  EXPECT_LE(p.predicted_peak_bytes, p.memory_budget_bytes);
  EXPECT_EQ(p.micro_batch_size, 2);
  EXPECT_EQ(p.grad_accum_steps, 3);
  EXPECT_EQ(p.world_size, 1);
  EXPECT_NE(decision(p, "memory").reason.find("fixed tp2 x pp1 mesh"), std::string::npos);
  // The plan records the run's mesh with the cost model's prediction, whose memory is the plan's.
  ASSERT_TRUE(p.layout);
  EXPECT_EQ(p.layout->summary(), "tp2 x pp1 x dp1, none, micro-batch 2 x 3, no recomputation");
  EXPECT_DOUBLE_EQ(p.layout->predicted_peak_bytes, p.predicted_peak_bytes);
  EXPECT_GT(p.layout->predicted_step_seconds, 0);
  EXPECT_NE(decision(p, "parallel_layout").reason.find("the run's mesh"), std::string::npos);
}

// A fixed pipeline's first stage holds min(p, m) micro-batches: with 4 micro-batches it needs more
// than with 1, both under the whole model's need at the same micro-batch.
TEST(FixedMeshPlan, APipelineCountsTheMicroBatchesInFlight) {
  const HardwareProfile hw = cpu_box(20ll << 30);
  auto peak = [&](const char* accum, const PlanContext& ctx) {
    return make_plan(hw, tiny({"dist.tensor_parallel=1", "dist.pipeline_parallel=2", "train.micro_batch_size=4",
                               "optimization.checkpoint_every=0", accum}),
                     ctx)
        .predicted_peak_bytes;
  };
  const double one = peak("train.grad_accum_steps=1", mesh(1, 2)), four = peak("train.grad_accum_steps=4", mesh(1, 2));
  const double whole = peak("train.grad_accum_steps=4", mesh(1, 1));
  EXPECT_LT(one, four);
  EXPECT_LT(four, whole);
}

// Under tensor parallelism the head is vocabulary-parallel: a fused head asked for is not planned
// (a warning says so) on a fixed mesh and on a searched one alike.
TEST(FixedMeshPlan, TensorParallelismPlansTheVocabularyParallelHead) {
  const RunConfig c =
      tiny({"dist.tensor_parallel=2", "dist.pipeline_parallel=1", "optimization.fused_lm_head_loss=true"});
  const Plan p = make_plan(cpu_box(20ll << 30), c, mesh(2, 1));
  EXPECT_FALSE(p.fused_lm_head_loss);
  EXPECT_NE(decision(p, "lm_head_loss").reason.find("vocabulary-parallel"), std::string::npos);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("optimization.fused_lm_head_loss = true does not apply"), std::string::npos);
  const Plan staged = make_plan(cpu_box(20ll << 30), tiny({"dist.pipeline_parallel=2", "dist.tensor_parallel=1",
                                                            "optimization.fused_lm_head_loss=true"}),
                                mesh(1, 2));
  EXPECT_TRUE(staged.fused_lm_head_loss);  // a pipeline's last stage runs the chunked head
  // A searched layout with a tensor group: `hwtrain plan` on 8 H100s with dist.tensor_parallel = 2.
  RunConfig eight_b;
  for (const char* o :
       {"model.preset=llama-3.1-8b", "dist.tensor_parallel=2", "optimization.fused_lm_head_loss=true"}) {
    eight_b.apply_override(o);
  }
  PlanContext described;
  described.world_size = 8;
  described.paper = true;
  const Plan searched = make_plan(*hardware_preset("h100-80gb", 8), eight_b, described);
  ASSERT_TRUE(searched.layout);
  EXPECT_EQ(searched.layout->tensor_parallel, 2);
  EXPECT_FALSE(searched.fused_lm_head_loss);
  EXPECT_NE(decision(searched, "lm_head_loss").reason.find("vocabulary-parallel"), std::string::npos);
}

// Llama 3.1 70B on 8 nodes of 8 H100s at a fixed TP8 x PP8 (one replica): planned at the split's
// memory (the whole-model figure was 1.1 TiB a GPU, refused), and the same peak the layout search
// predicts for that layout at the same micro-batch and micro-batches.
// Llama 3.1 70B at a fixed TP8 x PP8 on 8 nodes of 8 H100s, with `more` settings.
RunConfig llama_70b_tp8_pp8(const std::vector<std::string>& more) {
  RunConfig c;
  for (const char* o : {"model.preset=llama-3.1-70b", "dist.tensor_parallel=8", "dist.pipeline_parallel=8",
                        "dist.pipeline_chunks=1"}) {
    c.apply_override(o);
  }
  for (const auto& o : more) c.apply_override(o);
  return c;
}

// Its plan as `hwtrain plan --preset h100-80gb --gpus 8 --nodes 8` with every size set makes it.
Plan plan_fixed_70b(const HardwareProfile& hw, const RunConfig& c) {
  PlanContext fixed = mesh(8, 8);
  fixed.paper = true;
  fixed.ranks_per_node = 0;
  return make_plan(hw, c, fixed);
}

TEST(FixedMeshPlan, A70bAtTp8Pp8FitsWithTheSearchsMemory) {
  const RunConfig c = llama_70b_tp8_pp8({"train.micro_batch_size=4", "optimization.target_batch_size=64"});
  const HardwareProfile hw = *hardware_preset("h100-80gb", 64);
  const Plan p = plan_fixed_70b(hw, c);
  EXPECT_LE(p.predicted_peak_bytes, p.memory_budget_bytes);
  EXPECT_GT(p.predicted_peak_bytes, 20.0 * (1ll << 30));  // 70.6B / 64 ranks in bf16 + fp32 AdamW is 17.9 GiB
  EXPECT_EQ(p.grad_accum_steps, 16);
  // Its predicted step beside the search's choice for the same 64 GPUs and batch of 64: 16
  // micro-batches through 8 stages leave a bubble that interleaving or other cuts shrink.
  ASSERT_TRUE(p.layout);
  const std::string line = decision(p, "parallel_layout").reason;
  EXPECT_NE(
      line.find("the layout search (dist.tensor_parallel, pipeline_parallel, pipeline_chunks = auto) would choose"),
      std::string::npos)
      << line;
  EXPECT_NE(line.find("x slower (bubble"), std::string::npos) << line;
  PlanContext all;  // `hwtrain plan` with the sizes pinned for the search, over all 64 GPUs
  all.world_size = 64;
  all.paper = true;
  const Plan s = make_plan(hw, c, all);
  ASSERT_TRUE(s.layout);
  ASSERT_EQ(s.layout->name(), "tp8 x pp8 x dp1");
  EXPECT_EQ(s.micro_batch_size, 4);
  EXPECT_EQ(s.grad_accum_steps, 16);
  EXPECT_NEAR(p.predicted_peak_bytes, s.predicted_peak_bytes, 1e-9 * s.predicted_peak_bytes);
}

// A fixed pipeline whose micro-batch the planner chooses weighs the bubble as the layout search does:
// at TP8 x PP8 and a batch of 256, micro-batch 2 (128 a step) against the largest that fits, 4 (64 a
// step, bubble 7/71), and the same micro-batch and recomputation the search chooses for that mesh.
TEST(FixedMeshPlan, APipelinesMicroBatchWeighsTheBubbleAsTheSearchDoes) {
  const RunConfig c = llama_70b_tp8_pp8({"optimization.target_batch_size=256"});
  const HardwareProfile hw = *hardware_preset("h100-80gb", 64);
  const Plan p = plan_fixed_70b(hw, c);
  const std::string why = decision(p, "micro_batch_size").reason;
  EXPECT_NE(why.find("the fastest the cost model predicts on this pipeline"), std::string::npos) << why;
  EXPECT_NE(why.find("micro-batch 4, the largest that fits (64 a step), would be 1."), std::string::npos) << why;
  EXPECT_NE(why.find("x slower (bubble"), std::string::npos) << why;
  EXPECT_EQ(p.micro_batch_size * p.grad_accum_steps, 256);
  PlanContext all;
  all.world_size = 64;
  all.paper = true;
  const Plan s = make_plan(hw, c, all);  // the search with the sizes pinned
  ASSERT_TRUE(s.layout);
  ASSERT_EQ(s.layout->name(), "tp8 x pp8 x dp1");
  EXPECT_EQ(p.micro_batch_size, s.micro_batch_size);
  EXPECT_EQ(p.checkpoint_every, s.checkpoint_every);
  EXPECT_LT(p.micro_batch_size, 4);
}

// Leaving only dist.pipeline_chunks to the search keeps the fixed mesh's batch: micro-batch x
// accumulation rows per data-parallel group (16 at TP8 x PP8 on 64 GPUs), not per GPU (1024).
TEST(FixedMeshPlan, ChunksLeftToTheSearchKeepTheMeshsGlobalBatch) {
  const HardwareProfile hw = *hardware_preset("h100-80gb", 64);
  const Plan fixed = plan_fixed_70b(hw, llama_70b_tp8_pp8({}));
  PlanContext all;
  all.world_size = 64;
  all.paper = true;
  const Plan searched = make_plan(hw, llama_70b_tp8_pp8({"dist.pipeline_chunks=auto"}), all);
  ASSERT_TRUE(searched.layout);
  EXPECT_EQ(searched.layout->tensor_parallel * searched.layout->pipeline_parallel, 64);
  EXPECT_EQ(fixed.global_batch_size(), 16);
  EXPECT_EQ(searched.global_batch_size(), fixed.global_batch_size());
  // With the tensor and pipeline sizes open too, the search counts rows per GPU.
  const Plan open = make_plan(hw, llama_70b_tp8_pp8({"dist.tensor_parallel=auto", "dist.pipeline_parallel=auto",
                                                     "dist.pipeline_chunks=auto"}), all);
  EXPECT_EQ(open.global_batch_size(), 1024);
  // A setting that keeps the whole model on every rank plans data parallel over all 64: its batch
  // stays per rank, as with the sizes at 1 (the search's per-replica rule is not applied there).
  const Plan whole = make_plan(
      hw, llama_70b_tp8_pp8({"dist.pipeline_chunks=auto", "model.preset=gpt2", "optimization.auto_batch_size=true"}),
      all);
  EXPECT_FALSE(whole.layout && whole.layout->tensor_parallel > 1);
  EXPECT_EQ(whole.global_batch_size() % 64, 0);
  EXPECT_EQ(whole.global_batch_size(), whole.micro_batch_size * whole.grad_accum_steps * 64);
  EXPECT_GE(whole.micro_batch_size * whole.grad_accum_steps, 16);
}

}  // namespace fixed_mesh_plan
}  // namespace hwt
