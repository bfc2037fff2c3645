// The one update after backward (train/update_step.h), which HardwareAwareOptimizer::step (tests/run) and a
// user's own loop calls, following the same rule as the Trainer.
#include "hwtrain/train/update_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>


namespace hwt {
namespace {

// One process's rule: no norm or verdict across ranks.
UpdateRule rule(double max_grad_norm, bool low_precision) {
  UpdateRule r;
  r.max_grad_norm = max_grad_norm;
  r.low_precision = low_precision;
  return r;
}

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
  UpdateOutcome out = update_after_backward({p}, s, 1.0, rule(1.0, false), c.update(), c.zero());
  EXPECT_NEAR(out.grad_norm, 5.0, 1e-6);
  EXPECT_TRUE(out.updated);
  EXPECT_EQ(c.updates, 1);
  EXPECT_EQ(c.zeroed, 1);
  EXPECT_NEAR(p.grad().norm().item<double>(), 1.0, 1e-5);  // clipped (zero_grad is the caller's)

  p.mutable_grad() = torch::tensor({3.0f, 4.0f});
  out = update_after_backward({p}, s, 1.0, rule(0.0, false), c.update(), c.zero());
  EXPECT_NEAR(out.grad_norm, 5.0, 1e-6);
  EXPECT_TRUE(p.grad().equal(torch::tensor({3.0f, 4.0f})));  // measured, not clipped
}

TEST(UpdateStep, ANonFiniteLossSkipsTheUpdateInLowPrecisionOnly) {
  auto p = torch::zeros({2}, torch::requires_grad());
  GradScaler s = plain_scaler();
  Counted c;
  p.mutable_grad() = torch::ones({2});
  UpdateOutcome out = update_after_backward({p}, s, NAN, rule(1.0, true), c.update(), c.zero());
  EXPECT_FALSE(out.updated);
  EXPECT_TRUE(out.skipped_for_loss);
  EXPECT_EQ(c.updates, 0);
  EXPECT_EQ(c.zeroed, 1);  // the gradients are cleared either way
  p.mutable_grad() = torch::ones({2});
  out = update_after_backward({p}, s, NAN, rule(1.0, false), c.update(), c.zero());
  EXPECT_TRUE(out.updated);  // fp32 steps regardless
  EXPECT_FALSE(out.skipped_for_loss);
}

TEST(UpdateStep, InfGradientsUnderLossScalingSkipAndBackOff) {
  auto p = torch::zeros({2}, torch::requires_grad());
  GradScaler s = plain_scaler(/*enabled=*/true);
  Counted c;
  p.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity()});
  UpdateOutcome out = update_after_backward({p}, s, 1.0, rule(1.0, true), c.update(), c.zero());
  EXPECT_FALSE(out.updated);
  EXPECT_FALSE(out.skipped_for_loss);  // the scaler's skip, counted by the scaler
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_DOUBLE_EQ(s.current_scale(), 2.0);
}

}  // namespace
}  // namespace hwt
