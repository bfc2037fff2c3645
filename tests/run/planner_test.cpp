// The planner as a run configures it: a RunConfig read into a PlanIntent (run/run_bindings.h), then
// make_plan (plan/planner.h). The plan area has no test binary of its own: its inputs are built here.
#include "hwtrain/run/run_bindings.h"

#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/plan/memory_model.h"
#include "planner_machines.h"

namespace hwt {
namespace {

using namespace planner_machines;

TEST(Planner, Bf16OnCpuWithAvx512Bf16WhenMeasuredFaster) {
  Plan p = make_plan(cpu_machine(true, 300, 900), small_config());
  EXPECT_EQ(p.precision, Precision::Bf16);
  EXPECT_EQ(p.device.str(), "cpu");
  EXPECT_NE(decision(p, "precision").reason.find("AVX512_BF16"), std::string::npos);
  EXPECT_DOUBLE_EQ(p.peak_flops, 900e9);
  EXPECT_EQ(p.intra_op_threads, 2);
}

TEST(Planner, Fp32WhenBf16IsNotFasterOrMissing) {
  EXPECT_EQ(make_plan(cpu_machine(true, 300, 200), small_config()).precision, Precision::Fp32);
  Plan p = make_plan(cpu_machine(false, 300, 50), small_config());
  EXPECT_EQ(p.precision, Precision::Fp32);
  EXPECT_NE(decision(p, "precision").reason.find("lacks"), std::string::npos);
}

// Issue 19, defect 6: a probe that ran beside another rank read 5.6 GFLOP/s, planned fp32 and printed
// an MFU of 1297.8%. Under a tenth of a dtype's ISA peak the rates are set aside for the ISA's.
TEST(Planner, ContendedGemmProbeFallsBackToTheIsa) {
  HardwareProfile hw = cpu_machine(true, 5.6, 4.0);  // bf16 "slower": a neighbour, not the machine
  hw.math.peak_fp32_gflops = 333;
  hw.math.peak_bf16_gflops = 666;
  hw.math.fp32_efficiency = 5.6 / 333;
  hw.math.gemm_load_average = 3.9;
  ASSERT_TRUE(hw.math.gemm_contended());
  Plan p = make_plan(hw, small_config());
  EXPECT_EQ(p.precision, Precision::Bf16);
  EXPECT_NE(decision(p, "precision").reason.find("busy cores"), std::string::npos) << decision(p, "precision").reason;
  EXPECT_DOUBLE_EQ(p.peak_flops, 666e9);
  const std::string why = decision(p, "mfu_peak").reason;
  EXPECT_NE(why.find("ISA peak of bf16"), std::string::npos) << why;
  EXPECT_NE(why.find("load average 3.9"), std::string::npos) << why;

  // bf16 alone contended (seen beside busy processes: fp32 355, bf16 1.0 GFLOP/s): the ISA decides too.
  hw.math.fp32_gemm_gflops = 320;
  hw.math.fp32_efficiency = 320.0 / 333;
  hw.math.bf16_gemm_gflops = 1.0;
  hw.math.bf16_efficiency = 1.0 / 666;
  ASSERT_TRUE(hw.math.gemm_contended());
  EXPECT_EQ(make_plan(hw, small_config()).precision, Precision::Bf16);

  // The same bf16 reading without native bf16 (its peak = fp32's: emulated) is the machine's.
  MathLibInfo emulated = hw.math;
  emulated.peak_bf16_gflops = emulated.peak_fp32_gflops;
  EXPECT_FALSE(emulated.gemm_contended());

  hw.math.fp32_gemm_gflops = 0.25 * 333;  // a slow BLAS, not a contended probe: the measurement decides
  hw.math.fp32_efficiency = 0.25;
  hw.math.bf16_gemm_gflops = 0.15 * 666;
  hw.math.bf16_efficiency = 0.15;
  ASSERT_FALSE(hw.math.gemm_contended());
  p = make_plan(hw, small_config());
  EXPECT_EQ(p.precision, Precision::Bf16);
  EXPECT_DOUBLE_EQ(p.peak_flops, 0.15 * 666e9);
  hw.math.bf16_gemm_gflops = 0.12 * 666;  // measured slower than fp32: fp32
  hw.math.bf16_efficiency = 0.12;
  p = make_plan(hw, small_config());
  EXPECT_EQ(p.precision, Precision::Fp32);
  EXPECT_DOUBLE_EQ(p.peak_flops, 0.25 * 333e9);
}

// Eight GPU ranks on a node of 16 cores: each its device, the cores shared (they took all 16 each).
TEST(Planner, GpuRanksOfANodeShareItsCores) {
  HardwareProfile hw = gpu_machine(9);
  hw.cpu.num_physical_cores = 16;
  for (int i = 1; i < 8; ++i) hw.gpus.push_back(hw.gpus[0]);
  PlanContext ctx;
  ctx.world_size = 8;
  const Plan p = make_plan(hw, small_config(), ctx);
  ASSERT_TRUE(p.on_gpu());
  EXPECT_EQ(p.intra_op_threads, 2);
  EXPECT_NE(decision(p, "intra_op_threads").reason.find("shared by 8 local ranks"), std::string::npos);
}

// bf16 forced on AVX2 (no native bf16: peaks equal): the probe's emulated square product read 1.4
// GFLOP/s while the model's GEMMs ran 2.4x faster ("mfu 238%"). MFU is then measured against the
// fp32 rate, the FMA units' own, and says why.
TEST(Planner, EmulatedBf16MeasuresMfuAgainstTheFp32Rate) {
  HardwareProfile hw = cpu_machine(false, 90, 1.4);
  hw.math.peak_fp32_gflops = hw.math.peak_bf16_gflops = 207;
  RunConfig c = small_config();
  c.apply_override("optimization.mixed_precision_dtype=bf16");
  const Plan p = make_plan(hw, c);
  ASSERT_EQ(p.precision, Precision::Bf16);
  EXPECT_DOUBLE_EQ(p.peak_flops, 90e9);
  const std::string why = decision(p, "mfu_peak").reason;
  EXPECT_NE(why.find("measured fp32 GEMM on 2 threads (bf16 is emulated here"), std::string::npos) << why;
  EXPECT_NE(why.find("read 1.4 GFLOP/s"), std::string::npos) << why;
}

TEST(Planner, UserChoiceWins) {
  RunConfig c = small_config();
  c.apply_override("optimization.mixed_precision_dtype=fp32");
  EXPECT_EQ(make_plan(cpu_machine(true, 300, 900), c).precision, Precision::Fp32);
  c = small_config();
  c.apply_override("train.micro_batch_size=3");
  c.apply_override("optimization.intra_op_threads=1");
  Plan p = make_plan(cpu_machine(true, 300, 900), c);
  EXPECT_EQ(p.micro_batch_size, 3);
  EXPECT_EQ(p.intra_op_threads, 1);
}

TEST(Planner, AttentionGemmOnCpuWhereItsProbabilitiesFitElseSdpa) {
  Plan p = make_plan(cpu_machine(true, 300, 900), small_config());
  EXPECT_EQ(p.attention, AttentionKernel::Gemm);
  EXPECT_NE(decision(p, "attention").reason.find("fits"), std::string::npos);

  RunConfig dropout = small_config();
  dropout.apply_override("model.dropout=0.1");
  p = make_plan(cpu_machine(true, 300, 900), dropout);
  EXPECT_EQ(p.attention, AttentionKernel::Sdpa);
  EXPECT_NE(decision(p, "attention").reason.find("dropout"), std::string::npos);

  EXPECT_EQ(make_plan(gpu_machine(9), small_config()).attention, AttentionKernel::Sdpa);

  // Long sequences: 64 x 12 heads x 4096^2 probabilities per layer cannot be kept in 20 GiB.
  RunConfig long_context = small_config();
  long_context.apply_override("model.block_size=4096");
  long_context.apply_override("model.n_head=12");
  long_context.apply_override("model.n_embd=768");
  long_context.apply_override("train.micro_batch_size=64");
  p = make_plan(cpu_machine(true, 300, 900), long_context);
  EXPECT_EQ(p.attention, AttentionKernel::Sdpa);
  EXPECT_NE(decision(p, "attention").reason.find("keeps none"), std::string::npos);

  RunConfig user = small_config();
  user.apply_override("model.attention=sdpa");
  EXPECT_EQ(make_plan(cpu_machine(true, 300, 900), user).attention, AttentionKernel::Sdpa);
  user.apply_override("model.attention=math");
  EXPECT_EQ(make_plan(cpu_machine(true, 300, 900), user).attention, AttentionKernel::Math);
}

TEST(MemoryModel, GemmAttentionKeepsProbabilitiesPerLayerNotRecomputed) {
  MemoryQuery q;
  q.model.vocab_size = 256;
  q.model.n_layer = 6;
  q.model.block_size = 256;
  q.micro_batch_size = 12;
  q.attention = AttentionKernel::Sdpa;
  const double sdpa = estimate_memory(q).attention;
  q.attention = AttentionKernel::Gemm;
  const double gemm = estimate_memory(q).attention;
  const double per_layer = 12.0 * q.model.n_head * 256 * 256 * 5 / 8 * 4;  // fp32, four chunks of 64 rows
  EXPECT_GT(gemm, 6 * per_layer);
  EXPECT_LT(gemm, 7 * per_layer);
  EXPECT_GT(gemm, sdpa);
  q.checkpoint_every = 1;  // one layer's probabilities at a time
  EXPECT_LT(estimate_memory(q).attention, 2 * per_layer);
}

TEST(Planner, Fp16OnCpuFallsBackWithWarning) {
  RunConfig c = small_config();
  c.apply_override("optimization.mixed_precision_dtype=fp16");
  Plan p = make_plan(cpu_machine(true, 300, 900), c);
  EXPECT_EQ(p.precision, Precision::Bf16);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("fp16"), std::string::npos);
}

TEST(Planner, TargetBatchSetsAccumulation) {
  RunConfig c = small_config();
  c.apply_override("optimization.target_batch_size=64");
  c.apply_override("optimization.max_batch_size=16");
  Plan p = make_plan(cpu_machine(true, 300, 900), c);
  EXPECT_EQ(p.micro_batch_size, 16);
  EXPECT_EQ(p.grad_accum_steps, 4);
  EXPECT_EQ(p.global_batch_size(), 64);
}

// train.grad_accum_steps set without train.micro_batch_size: the micro-batch is searched for the
// accumulation's share of the rows, so that micro-batch x accumulation is the configured batch
// (16 x 2 rows), not a multiple of it (the search took 32 rows per micro-step, 64 in all, and a
// resumed run, whose config carries 16, could not continue it).
TEST(Planner, SetAccumulationSplitsTheRowsItDoesNotMultiplyThem) {
  RunConfig c = small_config();
  c.apply_override("train.grad_accum_steps=2");
  const Plan p = make_plan(cpu_machine(true, 300, 900), c);
  EXPECT_EQ(p.grad_accum_steps, 2);
  EXPECT_EQ(p.micro_batch_size * p.grad_accum_steps, c.train.micro_batch_size * 2);
}

TEST(Planner, OptimizerInBackwardTakesTheWholeBatchPerMicroStepOrRefuses) {
  RunConfig c = small_config();
  EXPECT_EQ(decision(make_plan(cpu_machine(true, 300, 900), c), "optimizer_step").value, "after backward");
  c.apply_override("optimization.optimizer_in_backward=true");
  c.apply_override("train.grad_clip=0");
  c.apply_override("optimization.target_batch_size=64");
  c.apply_override("optimization.max_batch_size=16");
  Plan p = make_plan(cpu_machine(true, 300, 900), c);
  EXPECT_TRUE(p.optimizer_in_backward());
  EXPECT_TRUE(Plan::from_json(p.to_json()).optimizer_in_backward());
  EXPECT_EQ(p.micro_batch_size, 64);  // one micro-batch per step, past max_batch_size
  EXPECT_EQ(p.grad_accum_steps, 1);
  EXPECT_NE(decision(p, "optimizer_step").value.find("in backward"), std::string::npos);

  RunConfig accumulating = c;
  accumulating.apply_override("train.micro_batch_size=16");
  EXPECT_THROW(make_plan(cpu_machine(true, 300, 900), accumulating), ConfigError);
  PlanContext two_ranks;
  two_ranks.world_size = 2;
  EXPECT_THROW(make_plan(cpu_machine(true, 300, 900), c, two_ranks), ConfigError);
  try {
    make_plan(gpu_machine(7), c);  // the plan's fp16 needs loss scaling
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fp16"), std::string::npos) << e.what();
  }
  // A whole batch that cannot fit even with recomputation is refused, not planned to fail.
  RunConfig huge = c;
  huge.apply_override("optimization.target_batch_size=100000");
  try {
    make_plan(cpu_machine(true, 300, 900), huge);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optimization.target_batch_size"), std::string::npos) << e.what();
  }
}

// GPT-2 124M's shape at a block size, vocabulary and micro-batch.
MemoryQuery gpt2_shape(int64_t block_size, int64_t vocab_size, int64_t micro_batch_size) {
  MemoryQuery q;
  q.model.n_layer = 12;
  q.model.n_head = 12;
  q.model.n_embd = 768;
  q.model.block_size = block_size;
  q.model.vocab_size = vocab_size;
  q.micro_batch_size = micro_batch_size;
  return q;
}

TEST(MemoryModel, OptimizerInBackwardHoldsOneBlockAndTheEmbeddingOfGradients) {
  MemoryQuery q = gpt2_shape(256, 256, 4);  // W2
  q.checkpoint_every = 1;
  const MemoryEstimate after = estimate_memory(q);
  q.optimizer_in_backward = true;
  const MemoryEstimate inside = estimate_memory(q);
  const double block = 12.0 * 768 * 768 + 13.0 * 768, embedding = (256.0 + 256.0) * 768;
  EXPECT_NEAR(inside.gradients, (block + embedding) * 4, 1e3);  // + a 12th of the final LayerNorm
  EXPECT_LT(inside.total(), after.total() - 0.9 * 11 * block * 4);
}

TEST(MemoryModel, FusedLmHeadLossRemovesTheLogits) {
  MemoryQuery q = gpt2_shape(1024, 50304, 8);
  const MemoryEstimate plain = estimate_memory(q);
  q.fused_lm_head_loss = true;
  const MemoryEstimate fused = estimate_memory(q);
  EXPECT_NEAR(plain.logits, 2.0 * 8 * 1024 * 50304 * 4, 1.0);
  EXPECT_LT(fused.logits, plain.logits / 5);
  EXPECT_LT(fused.total(), plain.total());
}

TEST(Planner, ModelThatCannotFitSaysHowMuchItNeeds) {
  RunConfig c;
  c.apply_override("model.n_layer=80");
  c.apply_override("model.n_embd=8192");
  c.apply_override("model.n_head=64");
  c.model.vocab_size = 32000;
  try {
    make_plan(gpu_machine(9, 80ll << 30), c);
    FAIL() << "expected HardwareError";
  } catch (const HardwareError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("needs"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dist.sharding = zero3"), std::string::npos) << msg;
  }
}

TEST(MemoryModel, Gpt2ParameterCount) {
  ModelConfig m;
  m.n_layer = 12;
  m.n_head = 12;
  m.n_embd = 768;
  m.block_size = 1024;
  m.vocab_size = 50257;
  EXPECT_EQ(gpt_num_parameters(m), 124439808);
}

TEST(MemoryModel, CheckpointingAndBf16ShrinkActivations) {
  MemoryQuery q;
  q.model.vocab_size = 320;
  q.micro_batch_size = 16;
  const double full = estimate_memory(q).activations;
  q.checkpoint_every = 1;
  EXPECT_LT(estimate_memory(q).activations, 0.6 * full);
  q.checkpoint_every = 0;
  q.precision = Precision::Bf16;
  EXPECT_LT(estimate_memory(q).activations, full);
}

TEST(Plan, JsonRoundTrip) {
  Plan p = make_plan(cpu_machine(true, 300, 900), small_config());
  Plan q = Plan::from_json(p.to_json());
  EXPECT_EQ(q.to_json(), p.to_json());
  EXPECT_THROW(Plan::from_json("{\"device\": 3}"), ConfigError);
}

}  // namespace
}  // namespace hwt

namespace hwt {
namespace {

TEST(PlanIntent, KeepsWhatTheUserSetAndLeavesTheRestToThePlanner) {
  RunConfig c = small_config();
  PlanIntent unset = plan_intent(c);
  EXPECT_FALSE(unset.micro_batch_size);
  EXPECT_FALSE(unset.checkpoint_every);
  EXPECT_FALSE(unset.attention);
  EXPECT_FALSE(unset.precision.dtype);
  // A value equal to the default still counts as the user's choice.
  c.apply_override("train.micro_batch_size=" + std::to_string(c.train.micro_batch_size));
  c.apply_override("optimization.checkpoint_every=0");
  c.apply_override("model.attention=math");
  c.apply_override("optimization.mixed_precision_dtype=bf16");
  c.apply_override("train.device=cuda:1");
  PlanIntent set = plan_intent(c);
  EXPECT_EQ(set.micro_batch_size, c.train.micro_batch_size);
  EXPECT_EQ(set.checkpoint_every, 0);
  EXPECT_EQ(set.attention, AttentionKernel::Math);
  EXPECT_EQ(set.precision.dtype, Precision::Bf16);
  EXPECT_EQ(set.precision.source, "optimization.mixed_precision_dtype = bf16");
  EXPECT_EQ(set.device.kind, DeviceIntent::Kind::Cuda);
  EXPECT_EQ(set.device.index, 1);
}

// optimization.optimizer_state_device = cpu is carried out (train/adamw.h's host_state): on a GPU it
// frees the moments' device memory; on a CPU the plan says it saves nothing; it cannot run with the
// optimizer in backward.
TEST(Planner, HostOptimizerStateIsPlannedWithItsCost) {
  RunConfig c = small_config();
  c.apply_override("optimization.optimizer_state_device=cpu");
  const Plan gpu = make_plan(gpu_machine(9), c);
  EXPECT_EQ(gpu.optimizer_state_device, StateDevice::Host);
  EXPECT_TRUE(gpu.warnings.empty());
  EXPECT_NE(gpu.to_json().find("\"optimizer_state_device\": \"cpu\""), std::string::npos);
  EXPECT_EQ(Plan::from_json(gpu.to_json()).optimizer_state_device, StateDevice::Host);
  const Plan cpu = make_plan(cpu_machine(true, 300, 900), c);
  EXPECT_EQ(cpu.optimizer_state_device, StateDevice::Host);
  bool said = false;
  for (const auto& d : cpu.decisions) {
    if (d.name == "optimizer_state") said = d.reason.find("the host is the device here") != std::string::npos;
  }
  EXPECT_TRUE(said) << cpu.to_json();
  c.apply_override("optimization.optimizer_in_backward=true");
  EXPECT_THROW(make_plan(gpu_machine(9), c), ConfigError);
}

TEST(Plan, JsonRoundTripKeepsTheTypedValues) {
  RunConfig c = small_config();
  c.apply_override("optimization.loss_scale_init=1024");
  c.apply_override("optimization.nonfinite_fallback_steps=7");
  c.apply_override("optimization.min_loss_scale=128");
  c.apply_override("optimization.max_loss_scale=4096");
  c.apply_override("model.attention=math");
  const Plan p = make_plan(gpu_machine(9), c);
  const Plan q = Plan::from_json(p.to_json());
  EXPECT_EQ(q.device, p.device);
  EXPECT_TRUE(q.device.is_cuda());
  EXPECT_EQ(q.attention, AttentionKernel::Math);
  EXPECT_EQ(q.loss_scaling.init_scale, 1024.0);
  EXPECT_EQ(q.loss_scaling.nonfinite_fallback_steps, 7);
  EXPECT_EQ(q.loss_scaling.min_scale, 128.0);  // the config's bounds reach the plan, and survive it
  EXPECT_EQ(q.loss_scaling.max_scale, 4096.0);
  EXPECT_EQ(q.to_json(), p.to_json());
  EXPECT_THROW(Plan::from_json(R"({"device": "tpu:0"})"), ConfigError);
}

}  // namespace
}  // namespace hwt
