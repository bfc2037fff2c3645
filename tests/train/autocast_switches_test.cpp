// optimization.cast_inputs / cast_outputs / autocast_cache (issue 22's seed knobs): each observed
// inside a bf16 step of the Trainer on a user's module, on and off: the dtype the module's forward
// receives, the dtype the loss function receives, and PyTorch's autocast cache flag.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include "hwtrain/train/autocast.h"
#include "hwtrain/train/trainer.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

struct Seen {
  c10::ScalarType input = c10::ScalarType::Undefined, output = c10::ScalarType::Undefined;
  bool cache = false;
};

Seen train_one_step(const AutocastSwitches& switches) {
  auto seen = std::make_shared<Seen>();
  auto linear = std::make_shared<torch::nn::LinearImpl>(4, 1);
  auto model = std::make_shared<ModuleModel>(
      linear,
      [linear, seen](const torch::Tensor& x) {
        seen->input = x.scalar_type();
        seen->cache = at::autocast::is_autocast_cache_enabled();
        return linear->forward(x);
      },
      [seen](const torch::Tensor& out, const torch::Tensor& y) {
        seen->output = out.scalar_type();
        return torch::mse_loss(out.to(torch::kFloat32), y);
      });
  auto x = torch::randn({8, 4});
  auto data = std::make_shared<ExampleData>(std::make_shared<TensorExamples>(x, x.sum(1, true)));
  Plan plan;
  plan.precision = Precision::Bf16;
  plan.micro_batch_size = 4;
  plan.num_workers = 0;
  plan.autocast = switches;
  TrainerOptions options;
  options.train.max_steps = 1;
  options.train.eval_interval = 0;
  testing::TempDir dir;
  Trainer trainer(options, plan, model, data, dir / "run");
  trainer.fit();
  return *seen;
}

TEST(AutocastSwitches, CastInputsGivesTheForwardBf16Inputs) {
  EXPECT_EQ(train_one_step({false, true, true}).input, torch::kFloat32);
  EXPECT_EQ(train_one_step({true, true, true}).input, torch::kBFloat16);
}

TEST(AutocastSwitches, CastOutputsGivesTheLossFp32) {
  EXPECT_EQ(train_one_step({false, true, true}).output, torch::kFloat32);
  EXPECT_EQ(train_one_step({false, false, true}).output, torch::kBFloat16);  // autocast's linear output
}

TEST(AutocastSwitches, CacheSwitchReachesAutocastAndIsRestored) {
  EXPECT_TRUE(train_one_step({false, true, true}).cache);
  EXPECT_FALSE(train_one_step({false, true, false}).cache);
  EXPECT_TRUE(at::autocast::is_autocast_cache_enabled());
}

}  // namespace
}  // namespace hwt
