// The planner's GPU decisions: precision by compute capability, memory under a GPU's budget
// (recomputation, micro-batch, the chunked LM head), CUDA graphs.
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "planner_machines.h"

namespace hwt {
namespace gpu_planner_test {
namespace {

using namespace planner_machines;

// GPT-2 124M with the 50304-token vocabulary.
RunConfig gpt2_config() {
  RunConfig c;
  c.apply_override("model.preset=gpt2");
  c.model.vocab_size = 50304;
  return c;
}

TEST(Planner, GpuPrecisionByComputeCapability) {
  EXPECT_EQ(make_plan(gpu_machine(9), small_config()).precision, Precision::Bf16);
  EXPECT_EQ(make_plan(gpu_machine(7), small_config()).precision, Precision::Fp16);
  EXPECT_EQ(make_plan(gpu_machine(6), small_config()).precision, Precision::Fp32);
  Plan p = make_plan(gpu_machine(9), small_config());
  EXPECT_EQ(p.device.str(), "cuda:0");
  EXPECT_TRUE(p.allow_tf32);
  EXPECT_TRUE(p.pin_memory);
}

TEST(Planner, CudaRequestedWithoutGpuIsAnError) {
  RunConfig c = small_config();
  c.apply_override("train.device=cuda");
  EXPECT_THROW(make_plan(cpu_machine(true, 1, 1), c), HardwareError);
}

TEST(Planner, ScarceMemoryTurnsOnCheckpointingOrShrinksBatch) {
  RunConfig c = gpt2_config();
  c.apply_override("optimization.target_batch_size=32");
  HardwareProfile hw = gpu_machine(9, 8ll << 30);
  Plan p = make_plan(hw, c);
  EXPECT_LE(p.predicted_peak_bytes, p.memory_budget_bytes);
  EXPECT_EQ(p.global_batch_size() >= 32, true);
  EXPECT_TRUE(p.micro_batch_size < 32 || p.checkpoint_every > 0)
      << "micro " << p.micro_batch_size << ", checkpoint_every " << p.checkpoint_every;
}

// A micro-batch that fills the GPU (8192 tokens) is not traded for recomputing every block, or for
// the chunked head's small GEMMs, to fit a larger one; a small one still is.
TEST(Planner, RecomputationBuysALargerMicroBatchOnlyWhileTheGpuIsNotFilled) {
  RunConfig c;
  c.apply_override("model.preset=gpt2-medium");
  c.model.vocab_size = 50304;
  c.apply_override("model.block_size=1024");
  c.apply_override("optimization.target_batch_size=128");
  c.apply_override("optimization.max_batch_size=64");
  const Plan roomy = make_plan(gpu_machine(9, 80ll << 30), c);
  EXPECT_EQ(roomy.checkpoint_every, 0) << roomy.to_text();
  EXPECT_GE(roomy.micro_batch_size * 1024, 8192) << roomy.to_text();
  EXPECT_LE(roomy.predicted_peak_bytes, roomy.memory_budget_bytes);
  EXPECT_FALSE(roomy.fused_lm_head_loss) << "micro-batch 8 fills the GPU with the whole logits: " << roomy.to_text();
  const Plan scarce = make_plan(gpu_machine(9, 12ll << 30), c);
  EXPECT_EQ(scarce.checkpoint_every, 1) << scarce.to_text();
  // A micro-batch the user fixed cannot shrink: the chunked head stays where the plain one does not fit.
  RunConfig fixed = gpt2_config();
  fixed.apply_override("model.block_size=1024");
  fixed.apply_override("train.micro_batch_size=32");
  EXPECT_TRUE(make_plan(gpu_machine(9, 24ll << 30), fixed).fused_lm_head_loss);
}

TEST(Planner, FusedLmHeadLossWhenTheLogitsDoNotFitUnlessTheUserSaysOtherwise) {
  RunConfig c = gpt2_config();
  c.apply_override("optimization.target_batch_size=32");
  // 8 GiB: micro-batch 32 at block 1024 needs far more with its whole logits; chunk them first.
  Plan scarce = make_plan(gpu_machine(9, 8ll << 30), c);
  EXPECT_TRUE(scarce.fused_lm_head_loss);
  EXPECT_TRUE(Plan::from_json(scarce.to_json()).fused_lm_head_loss);
  // A small micro-batch fits with the whole logits: the plain (faster) head.
  c.apply_override("train.micro_batch_size=1");
  EXPECT_FALSE(make_plan(gpu_machine(9, 80ll << 30), c).fused_lm_head_loss);

  c.apply_override("optimization.fused_lm_head_loss=true");
  EXPECT_TRUE(make_plan(gpu_machine(9, 80ll << 30), c).fused_lm_head_loss);
  RunConfig user_off = gpt2_config();
  user_off.apply_override("optimization.target_batch_size=32");
  user_off.apply_override("optimization.fused_lm_head_loss=false");
  EXPECT_FALSE(make_plan(gpu_machine(9, 8ll << 30), user_off).fused_lm_head_loss);
}

TEST(Planner, CudaGraphsCaptureAOneGpuBf16StepAndSayWhyNotElsewhere) {
  RunConfig c = small_config();
  c.apply_override("optimization.cuda_graphs=true");
  const Plan gpu = make_plan(gpu_machine(9), c);
  EXPECT_TRUE(gpu.cuda_graphs);
  EXPECT_EQ(decision(gpu, "cuda_graphs").value.rfind("on after 3", 0), 0u) << decision(gpu, "cuda_graphs").value;
  EXPECT_TRUE(gpu.warnings.empty());
  EXPECT_TRUE(Plan::from_json(gpu.to_json()).cuda_graphs);

  auto refused = [](const Plan& p, const std::string& why) {
    EXPECT_FALSE(p.cuda_graphs);
    ASSERT_EQ(p.warnings.size(), 1u);
    EXPECT_NE(p.warnings[0].find("optimization.cuda_graphs = true cannot apply: "), std::string::npos) << p.warnings[0];
    EXPECT_NE(p.warnings[0].find(why), std::string::npos) << p.warnings[0];
  };
  refused(make_plan(cpu_machine(true, 300, 900), c), "not a CUDA device");
  RunConfig fp16 = c;
  fp16.apply_override("optimization.mixed_precision_dtype=fp16");
  refused(make_plan(gpu_machine(9), fp16), "fp16");
  PlanContext two_ranks;
  two_ranks.world_size = 2;
  refused(make_plan(gpu_machine(9), c, two_ranks), "collectives");
  RunConfig offload = c;
  offload.apply_override("optimization.optimizer_state_device=cpu");
  refused(make_plan(gpu_machine(9), offload), "host memory");
  RunConfig recompute = c;
  recompute.apply_override("optimization.checkpoint_every=1");
  refused(make_plan(gpu_machine(9), recompute), "recomputation");
  // Not asked for: off, and said so on a GPU.
  EXPECT_EQ(decision(make_plan(gpu_machine(9), small_config()), "cuda_graphs").value, "off");
}

}  // namespace
}  // namespace gpu_planner_test
}  // namespace hwt
