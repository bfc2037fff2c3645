// Mixed precision at run time: enable/disable/status, the fallback to fp32 when an operation has
// no low-precision kernel (the step is redone in fp32 on the same data) and after K consecutive
// non-finite losses (their updates skipped, so the weights stay the last good ones), and a
// resumed run keeping the fallback.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include "trainer_fixture.h"
#include "trainer_test_seam.h"

namespace hwt {
namespace {

bool autocast_on() { return at::autocast::is_autocast_enabled(at::kCPU); }

// ZeRO-2/3 hold bf16 parameters: their precision is pinned, and a fallback to fp32 stops the run
// with both reasons instead of continuing in bf16 parameters without autocast.
TEST(MixedPrecision, APinnedPrecisionRefusesToChange) {
  Plan plan;
  plan.precision = Precision::Bf16;
  plan.hardware_bf16 = true;
  MixedPrecision mp(plan);
  mp.pin("dist.sharding = zero3 computes with bf16 parameters");
  EXPECT_THROW(mp.disable(), ConfigError);
  try {
    mp.fall_back("3 consecutive steps had a non-finite loss");
    ADD_FAILURE() << "a pinned precision must not fall back";
  } catch (const HardwareError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("non-finite"), std::string::npos) << what;
    EXPECT_NE(what.find("dist.sharding = zero3"), std::string::npos) << what;
  }
  EXPECT_EQ(mp.precision(), Precision::Bf16);
}

// In fp32 there is nothing to fall back to: K consecutive non-finite losses stop the run, naming
// the key and what to change; a finite one in between starts the count again; K = 0 never stops.
TEST(MixedPrecision, Fp32StopsAfterKConsecutiveNonFiniteLosses) {
  Plan plan;
  plan.precision = Precision::Fp32;
  plan.loss_scaling.nonfinite_fallback_steps = 3;
  MixedPrecision mp(plan);
  EXPECT_FALSE(mp.note_step(false));
  EXPECT_FALSE(mp.note_step(false));
  EXPECT_FALSE(mp.note_step(true));
  EXPECT_FALSE(mp.note_step(false));
  EXPECT_FALSE(mp.note_step(false));
  try {
    mp.note_step(false);
    ADD_FAILURE() << "the third consecutive non-finite loss in fp32 must stop the run";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("training diverged: 3 consecutive steps"), std::string::npos) << what;
    EXPECT_NE(what.find("optimization.nonfinite_fallback_steps = 3"), std::string::npos) << what;
    EXPECT_NE(what.find("train.lr"), std::string::npos) << what;
  }
  plan.loss_scaling.nonfinite_fallback_steps = 0;
  MixedPrecision never(plan);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(never.note_step(false));
}

// The plan's loss-scale bounds reach the fp16 scaler the trainer steps with.
TEST(MixedPrecision, Fp16ScalerTakesThePlansBounds) {
  Plan plan;
  plan.precision = Precision::Fp16;
  plan.loss_scaling.init_scale = 64;
  plan.loss_scaling.growth_interval = 1;
  plan.loss_scaling.max_scale = 128;
  MixedPrecision mp(plan);
  ASSERT_TRUE(mp.scaler().enabled());
  auto p = torch::ones({2}, torch::requires_grad());
  for (int i = 0; i < 3; ++i) {
    p.mutable_grad() = torch::ones({2});
    mp.scaler().unscale({p});
    mp.scaler().update();
  }
  EXPECT_DOUBLE_EQ(mp.scaler().current_scale(), 128);
}

TEST(MixedPrecision, EnableDisableAndStatus) {
  TrainerFixture f;
  f.plan.precision = Precision::Bf16;
  f.plan.hardware_bf16 = true;
  auto t = f.make("mp");
  auto s = t->get_mixed_precision_status();
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.dtype, "bf16");
  EXPECT_FALSE(s.loss_scaling);  // bf16 needs no loss scaling
  EXPECT_TRUE(s.hardware_bf16);

  t->disable_mixed_precision();
  s = t->get_mixed_precision_status();
  EXPECT_FALSE(s.enabled);
  EXPECT_EQ(s.dtype, "fp32");
  EXPECT_EQ(s.planned_dtype, "bf16");
  // fp32 evaluation: exactly what a trainer planned in fp32 computes.
  const double fp32_eval = t->evaluate();
  f.plan.precision = Precision::Fp32;
  EXPECT_EQ(fp32_eval, f.make("ref")->evaluate());

  t->enable_mixed_precision();
  EXPECT_EQ(t->get_mixed_precision_status().dtype, "bf16");
  EXPECT_NE(t->evaluate(), fp32_eval);  // bf16 autocast changes the numbers

  t->enable_mixed_precision(Precision::Fp16);  // fp16 brings dynamic loss scaling
  s = t->get_mixed_precision_status();
  EXPECT_TRUE(s.loss_scaling);
  EXPECT_EQ(s.loss_scale, 65536.0);
}

TEST(MixedPrecision, MissingLowPrecisionKernelRedoesTheStepInFp32) {
  torch::set_num_threads(1);
  TrainerFixture f;
  f.plan.precision = Precision::Fp32;
  auto reference = f.make("fp32");
  reference->fit();

  f.plan.precision = Precision::Bf16;
  auto t = f.make("bf16");
  int thrown = 0;
  TrainerTestSeam::set_loss_hook(*t, [&](const torch::Tensor& loss) {
    if (autocast_on()) {
      ++thrown;
      throw std::runtime_error("\"addmm_impl_cpu_\" not implemented for 'BFloat16'");
    }
    return loss;
  });
  t->fit();
  EXPECT_EQ(thrown, 1);
  auto s = t->get_mixed_precision_status();
  EXPECT_EQ(s.dtype, "fp32");
  EXPECT_NE(s.fallback_reason.find("no bf16 kernel"), std::string::npos) << s.fallback_reason;
  // Nothing of the failed attempt remains: the run is the fp32 run, step for step.
  EXPECT_EQ(t->loss_history(), reference->loss_history());
}

TEST(MixedPrecision, OtherErrorsAreNotSwallowed) {
  TrainerFixture f;
  f.plan.precision = Precision::Bf16;
  auto t = f.make("err");
  TrainerTestSeam::set_loss_hook(*t, [](const torch::Tensor&) -> torch::Tensor { throw std::runtime_error("disk on fire"); });
  EXPECT_THROW(t->fit(), std::runtime_error);
}

// With the optimizer in backward the weights move inside backward, so a skipped step must not
// run backward at all: the same last-good-weights guarantee, checked the same way.
void expect_nonfinite_losses_fall_back_from_last_good_weights(bool optimizer_in_backward) {
  torch::set_num_threads(1);
  TrainerFixture f;
  f.plan.precision = Precision::Bf16;
  if (optimizer_in_backward) {
    f.plan.optimizer_step = OptimizerStep::InBackward;
    f.plan.micro_batch_size = 8;
    f.plan.grad_accum_steps = 1;
    f.config.train.grad_clip = 0;
  }
  f.plan.loss_scaling.nonfinite_fallback_steps = 3;
  f.config.train.max_steps = 7;
  auto t = f.make("nan");
  const NamedTensors initial = t->snapshot_weights();
  // Overflow in low precision from step 2 on; fp32 is fine.
  int calls = 0;
  TrainerTestSeam::set_loss_hook(*t, [&](const torch::Tensor& loss) {
    ++calls;
    return autocast_on() && calls > f.plan.grad_accum_steps ? loss * std::numeric_limits<float>::infinity() : loss;
  });
  struct Watch : Callback {
    std::vector<NamedTensors> weights;
    std::string name() const override { return "watch"; }
    void on_step_end(TrainerControl& c, const StepMetrics&) override { weights.push_back(c.snapshot_weights()); }
  };
  auto watch = std::make_shared<Watch>();
  t->add_callback(watch);
  t->fit();

  const auto& losses = t->loss_history();
  ASSERT_EQ(losses.size(), 7u);
  EXPECT_TRUE(std::isfinite(losses[0]));
  for (int i = 1; i <= 3; ++i) EXPECT_FALSE(std::isfinite(losses[i])) << "step " << i + 1;
  for (int i = 4; i < 7; ++i) EXPECT_TRUE(std::isfinite(losses[i])) << "step " << i + 1;
  // Steps 2-4 were skipped: the weights after step 4 are those after step 1.
  for (size_t k = 0; k < initial.size(); ++k) {
    EXPECT_TRUE(torch::equal(watch->weights[3][k].second, watch->weights[0][k].second)) << initial[k].first;
  }
  EXPECT_FALSE(torch::equal(watch->weights[6][0].second, watch->weights[0][0].second));
  auto s = t->get_mixed_precision_status();
  EXPECT_EQ(s.dtype, "fp32");
  EXPECT_EQ(s.skipped_steps, 3);
  EXPECT_NE(s.fallback_reason.find("3 consecutive steps had a non-finite loss"), std::string::npos) << s.fallback_reason;

  // A resumed run stays in fp32 and says why.
  auto ckpt = t->save_checkpoint();
  auto resumed = f.make("nan");
  resumed->resume_from(ckpt);
  EXPECT_EQ(resumed->get_mixed_precision_status().dtype, "fp32");
  EXPECT_NE(resumed->get_mixed_precision_status().fallback_reason.find("non-finite"), std::string::npos);
}

TEST(MixedPrecision, NonFiniteLossesFallBackToFp32FromTheLastGoodWeights) {
  expect_nonfinite_losses_fall_back_from_last_good_weights(false);
}

TEST(MixedPrecision, NonFiniteLossesFallBackFromTheLastGoodWeightsWithTheOptimizerInBackward) {
  expect_nonfinite_losses_fall_back_from_last_good_weights(true);
}

}  // namespace
}  // namespace hwt
