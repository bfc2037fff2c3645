// HardwareAwareOptimizer (run/hardware_aware_optimizer.h): a user's own loop gets the Trainer's
// update rule (train/update_step.h).
#include <gtest/gtest.h>

#include <limits>

#include "hwtrain/run/hardware_aware_optimizer.h"
#include "train/fake_control.h"

namespace hwt {
namespace {

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

// A Trainer's run reports its skipped updates through the metrics probe (it read 0 before).
TEST(HardwareAwareOptimizer, MetricsCountATrainersSkippedUpdates) {
  RunConfig config;
  config.model.vocab_size = 64;
  HardwareAwareOptimizer hao(config, bf16_cpu());
  const auto probe = hao.metrics_probe();
  testing::FakeTrainerControl control;
  StepMetrics m = testing::step_record(1, 2.0);
  m.skipped_steps = 2;  // the loss scaler's count so far
  probe->on_step_end(control, m);
  EXPECT_EQ(hao.get_optimization_metrics()["measured"]["skipped_updates"], 2);
  EXPECT_EQ(hao.get_optimization_metrics()["measured"]["steps"], 1);
}

}  // namespace
}  // namespace hwt
