// Tests of the trainer's parts: schedule, GradScaler, AdamW, autocast regions.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include "hwtrain/train/adamw.h"
#include "hwtrain/train/autocast.h"
#include "hwtrain/train/grad_scaler.h"
#include "hwtrain/core/error.h"
#include "hwtrain/train/lr_schedule.h"

namespace hwt {
namespace {

TEST(LrSchedule, WarmupThenCosineToFloor) {
  TrainConfig c;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.warmup_steps = 10;
  c.max_steps = 110;
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 9), 1.0);
  EXPECT_NEAR(scheduled_lr(c, 10), 1.0, 1e-12);
  EXPECT_NEAR(scheduled_lr(c, 60), 0.55, 1e-12);  // halfway: min + (lr - min) / 2
  EXPECT_NEAR(scheduled_lr(c, 109), 0.1, 1e-3);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 500), 0.1);
  c.lr_schedule = LrSchedule::kLinear;
  EXPECT_NEAR(scheduled_lr(c, 60), 0.55, 1e-12);
  c.lr_schedule = LrSchedule::kConstant;
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 60), 1.0);
}

// The default floor is lr / 10 (min_lr = -1), so an lr set alone below the old fixed 2e-4 is valid.
TEST(LrSchedule, TheDefaultFloorIsATenthOfTheLr) {
  TrainConfig c;
  c.lr = 1e-4;
  EXPECT_NO_THROW(c.validate());
  c.warmup_steps = 0;
  c.max_steps = 10;
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 10), 1e-5);
  c.min_lr = 2e-4;  // a floor above the peak stays an error
  EXPECT_THROW(c.validate(), ConfigError);
  c.min_lr = -0.5;
  EXPECT_THROW(c.validate(), ConfigError);
}

TEST(GradScaler, SkipsBacksOffAndGrows) {
  GradScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = 2;
  GradScaler s(o, torch::kCPU);
  auto p = torch::ones({3}, torch::requires_grad());
  auto loss = (p * 2).sum();
  s.scale(loss).backward();
  EXPECT_FLOAT_EQ(p.grad()[0].item<float>(), 2048.0f);
  s.unscale({p});
  EXPECT_FLOAT_EQ(p.grad()[0].item<float>(), 2.0f);
  EXPECT_FALSE(s.found_inf());
  s.update();
  EXPECT_DOUBLE_EQ(s.current_scale(), 1024);  // one clean step of two
  p.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity(), 0.0f});
  s.unscale({p});
  EXPECT_TRUE(s.found_inf());
  s.update();
  EXPECT_DOUBLE_EQ(s.current_scale(), 512);  // backoff
  EXPECT_EQ(s.skipped_steps(), 1);
  for (int i = 0; i < 2; ++i) {
    p.mutable_grad() = torch::ones({3});
    s.unscale({p});
    s.update();
  }
  EXPECT_DOUBLE_EQ(s.current_scale(), 1024);  // growth after 2 clean steps

  GradScaler restored(o, torch::kCPU);
  restored.load_state(s.state());
  EXPECT_DOUBLE_EQ(restored.current_scale(), 1024);
  EXPECT_EQ(restored.skipped_steps(), 1);
}

// The seeds' min_loss_scale / max_loss_scale: backoff stops at the floor (the step is still
// skipped), growth stops at the cap.
TEST(GradScaler, BacksOffAndGrowsWithinItsBounds) {
  GradScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = 1;
  o.min_scale = 256;
  o.max_scale = 2048;
  GradScaler s(o, torch::kCPU);
  auto p = torch::ones({2}, torch::requires_grad());
  for (int i = 0; i < 4; ++i) {  // 1024 -> 512 -> 256 -> 256 -> 256
    p.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity()});
    s.unscale({p});
    EXPECT_TRUE(s.found_inf());
    s.update();
  }
  EXPECT_DOUBLE_EQ(s.current_scale(), 256);
  EXPECT_EQ(s.skipped_steps(), 4);
  for (int i = 0; i < 5; ++i) {  // 256 -> 512 -> 1024 -> 2048 -> 2048 -> 2048
    p.mutable_grad() = torch::ones({2});
    s.unscale({p});
    s.update();
  }
  EXPECT_DOUBLE_EQ(s.current_scale(), 2048);
  o.min_scale = o.max_scale = 0;  // unbounded, as PyTorch's: past both
  GradScaler free(o, torch::kCPU);
  for (int i = 0; i < 3; ++i) {
    p.mutable_grad() = torch::ones({2});
    free.unscale({p});
    free.update();
  }
  EXPECT_DOUBLE_EQ(free.current_scale(), 8192);
}

TEST(GradScaler, DisabledIsANoOp) {
  GradScalerOptions o;
  o.enabled = false;
  GradScaler s(o, torch::kCPU);
  auto loss = torch::tensor(3.0);
  EXPECT_TRUE(s.scale(loss).equal(loss));
  EXPECT_DOUBLE_EQ(s.current_scale(), 1.0);
}

std::vector<std::pair<std::string, torch::Tensor>> make_params(int seed) {
  torch::manual_seed(seed);
  return {{"w", torch::randn({8, 4}, torch::requires_grad())}, {"b", torch::randn({4}, torch::requires_grad())}};
}

TEST(AdamW, FusedMatchesReference) {
  auto a = make_params(1), b = make_params(1);
  AdamWOptions fused_options, reference_options;
  reference_options.fused = false;
  AdamW fused({a[0]}, {a[1]}, fused_options), reference({b[0]}, {b[1]}, reference_options);
  for (int step = 0; step < 5; ++step) {
    torch::manual_seed(100 + step);
    auto g_w = torch::randn({8, 4}), g_b = torch::randn({4});
    a[0].second.mutable_grad() = g_w.clone();
    a[1].second.mutable_grad() = g_b.clone();
    b[0].second.mutable_grad() = g_w.clone();
    b[1].second.mutable_grad() = g_b.clone();
    fused.step(1e-2);
    reference.step(1e-2);
  }
  EXPECT_TRUE(torch::allclose(a[0].second, b[0].second, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(a[1].second, b[1].second, 1e-5, 1e-6));
  // Weight decay applies to the decayed group only: the bias moved by Adam alone.
  auto state = fused.state();
  EXPECT_EQ(state.size(), 6u);
  EXPECT_FLOAT_EQ(state[2].second.item<float>(), 5.0f);  // step count of "w"
}

TEST(AdamW, FoundInfSkipsTheUpdateAndTheStepCount) {
  auto a = make_params(2);
  AdamW opt({a[0]}, {a[1]}, AdamWOptions{});
  auto before = a[0].second.detach().clone();
  a[0].second.mutable_grad() = torch::ones({8, 4});
  a[1].second.mutable_grad() = torch::ones({4});
  opt.step(1e-2, torch::ones({}), torch::ones({}));
  EXPECT_TRUE(a[0].second.equal(before));
  EXPECT_FLOAT_EQ(opt.state()[2].second.item<float>(), 0.0f);
}

TEST(AdamW, StateRoundTrip) {
  auto a = make_params(3), b = make_params(3);
  AdamW x({a[0]}, {a[1]}, AdamWOptions{}), y({b[0]}, {b[1]}, AdamWOptions{});
  a[0].second.mutable_grad() = torch::ones({8, 4});
  a[1].second.mutable_grad() = torch::ones({4});
  x.step(1e-2);
  y.load_state(x.state());
  for (size_t i = 0; i < x.state().size(); ++i) EXPECT_TRUE(x.state()[i].second.equal(y.state()[i].second));
}

TEST(Autocast, RegionSetsAndRestoresState) {
  auto a = torch::randn({4, 4}), b = torch::randn({4, 4});
  {
    AutocastGuard guard(c10::DeviceType::CPU, torch::kBFloat16);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    {
      AutocastGuard fp32(c10::DeviceType::CPU, torch::kFloat32);  // a no-op region
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    }
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
}

}  // namespace
}  // namespace hwt
