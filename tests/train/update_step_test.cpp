// The one update after backward (train/update_step.h), and HardwareAwareOptimizer::step, which a
// user's own loop calls, following the same rule as the Trainer.
#include "hwtrain/train/update_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hwtrain/train/hardware_aware_optimizer.h"

namespace hwt {
namespace {

struct Counted {
  int updates = 0, zeroed = 0;
  std::function<void()> update() {
    return [this] { ++updates; };
  }
  std::function<void()> zero() {
    return [this] { ++zeroed; };
  }
};

GradScaler plain_scaler(bool enabled = false) {
  GradScalerOptions o;
  o.enabled = enabled;
  o.init_scale = 4;
  return GradScaler(o, torch::kCPU);
}

TEST(UpdateStep, ClipsTheGlobalNormAndReportsItBeforeClipping) {
  auto p = torch::zeros({2}, torch::requires_grad());
  p.mutable_grad() = torch::tensor({3.0f, 4.0f});
  GradScaler s = plain_scaler();
  Counted c;
  UpdateOutcome out = update_after_backward({p}, s, 1.0, {1.0, false}, c.update(), c.zero());
  EXPECT_NEAR(out.grad_norm, 5.0, 1e-6);
  EXPECT_TRUE(out.updated);
  EXPECT_EQ(c.updates, 1);
  EXPECT_EQ(c.zeroed, 1);
  EXPECT_NEAR(p.grad().norm().item<double>(), 1.0, 1e-5);  // clipped (zero_grad is the caller's)

  p.mutable_grad() = torch::tensor({3.0f, 4.0f});
  out = update_after_backward({p}, s, 1.0, {0.0, false}, c.update(), c.zero());
  EXPECT_NEAR(out.grad_norm, 5.0, 1e-6);
  EXPECT_TRUE(p.grad().equal(torch::tensor({3.0f, 4.0f})));  // measured, not clipped
}

TEST(UpdateStep, ANonFiniteLossSkipsTheUpdateInLowPrecisionOnly) {
  auto p = torch::zeros({2}, torch::requires_grad());
  GradScaler s = plain_scaler();
  Counted c;
  p.mutable_grad() = torch::ones({2});
  UpdateOutcome out = update_after_backward({p}, s, NAN, {1.0, true}, c.update(), c.zero());
  EXPECT_FALSE(out.updated);
  EXPECT_TRUE(out.skipped_for_loss);
  EXPECT_EQ(c.updates, 0);
  EXPECT_EQ(c.zeroed, 1);  // the gradients are cleared either way
  p.mutable_grad() = torch::ones({2});
  out = update_after_backward({p}, s, NAN, {1.0, false}, c.update(), c.zero());
  EXPECT_TRUE(out.updated);  // fp32 steps regardless
  EXPECT_FALSE(out.skipped_for_loss);
}

TEST(UpdateStep, InfGradientsUnderLossScalingSkipAndBackOff) {
  auto p = torch::zeros({2}, torch::requires_grad());
  GradScaler s = plain_scaler(/*enabled=*/true);
  Counted c;
  p.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity()});
  UpdateOutcome out = update_after_backward({p}, s, 1.0, {1.0, true}, c.update(), c.zero());
  EXPECT_FALSE(out.updated);
  EXPECT_FALSE(out.skipped_for_loss);  // the scaler's skip, counted by the scaler
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_DOUBLE_EQ(s.current_scale(), 2.0);
}

HardwareProfile bf16_cpu() {
  HardwareProfile hw;
  hw.cpu.num_physical_cores = 1;
  hw.cpu.isa.avx512_bf16 = true;
  hw.memory.effective_available_bytes = 8ll << 30;
  return hw;
}

// A user's loop: before, HardwareAwareOptimizer::step applied a bf16 step with a NaN loss, so the
// weights became NaN; now it keeps the last good weights, as the Trainer does.
TEST(HardwareAwareOptimizer, UserLoopSkipsANonFiniteLowPrecisionStep) {
  RunConfig config;
  config.model.vocab_size = 64;
  config.apply_override("optimization.mixed_precision_dtype=bf16");
  HardwareAwareOptimizer hao(config, bf16_cpu());
  ASSERT_EQ(hao.plan().precision, Precision::Bf16);
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  const auto before = net->weight.detach().clone();
  hao.backward(net(torch::ones({1, 4})).sum() * std::numeric_limits<float>::quiet_NaN());
  hao.step(sgd);
  EXPECT_TRUE(net->weight.equal(before));
  EXPECT_EQ(hao.skipped_steps(), 1);
  EXPECT_EQ(hao.get_optimization_metrics()["measured"]["skipped_updates"], 1);
  hao.backward(net(torch::ones({1, 4})).sum());
  hao.step(sgd);
  EXPECT_FALSE(net->weight.equal(before));
  EXPECT_TRUE(torch::isfinite(net->weight).all().item<bool>());
}

}  // namespace
}  // namespace hwt
