// AdamW with host_state (optimization.optimizer_state_device = cpu): the same updates as AdamW on the
// device, bit for bit here, where the "device" is the host too (the GPU path differs only in pinned
// buffers and asynchronous copies); its state lives in host memory apart from the parameters; a
// parameter written by someone else between steps is read back; its checkpoint state loads into the
// device optimizer and back.
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/train/adamw.h"

namespace hwt {
namespace offload_test {

using Named = std::vector<std::pair<std::string, torch::Tensor>>;

// A least-squares problem: a weight (decayed), a bias (not), one gradient step at a time.
struct Problem {
  torch::Tensor w, b, x, y;
  explicit Problem(int64_t in = 64, int64_t out = 80) {
    torch::manual_seed(3);
    w = (torch::randn({in, out}) * 0.1).requires_grad_();
    b = torch::zeros({out}, torch::requires_grad());
    x = torch::randn({128, in});
    y = torch::randn({128, out});
  }
  Named decay() { return {{"w", w}}; }
  Named no_decay() { return {{"b", b}}; }
  void backward(double scale = 1.0) {
    w.mutable_grad() = torch::Tensor();
    b.mutable_grad() = torch::Tensor();
    ((torch::mm(x, w) + b - y).pow(2).mean() * scale).backward();
  }
};

AdamWOptions options(bool host, bool fused, bool int8 = false) {
  AdamWOptions o;
  o.host_state = host;
  o.fused = fused;
  o.int8_moments = int8;
  return o;
}

void expect_bitwise_equal(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  EXPECT_TRUE(torch::equal(a, b)) << what << ": max difference " << (a - b).abs().max().item<double>();
}

// ZeRO's segments are views of one flat shard sharing its version counter: after a step every
// master is current, and none is read from the device again (each read was a device-to-host copy).
TEST(AdamWOffload, ViewsOfOneShardAreReadOnce) {
  torch::Tensor flat = torch::randn({10});
  torch::Tensor a = flat.narrow(0, 0, 6), b = flat.narrow(0, 6, 4);
  AdamW opt({{"a", a}}, {{"b", b}}, options(true, true));
  for (int step = 1; step <= 3; ++step) {
    a.mutable_grad() = torch::ones({6});
    b.mutable_grad() = torch::ones({4});
    opt.step(1e-2);
  }
  EXPECT_EQ(opt.master_reads(), 2);
  flat.add_(1.0);  // written by someone else: both read again
  a.mutable_grad() = torch::ones({6});
  b.mutable_grad() = torch::ones({4});
  opt.step(1e-2);
  EXPECT_EQ(opt.master_reads(), 4);
}

TEST(AdamWOffload, StepsEqualTheDeviceOptimizerBitForBit) {
  for (bool fused : {true, false}) {
    for (bool int8 : {false, true}) {
      Problem device(int8 ? 96 : 64), host(int8 ? 96 : 64);  // 96x80 = 7680 elements: quantized under int8
      AdamW on_device(device.decay(), device.no_decay(), options(false, fused, int8));
      AdamW on_host(host.decay(), host.no_decay(), options(true, fused, int8));
      for (int step = 1; step <= 6; ++step) {
        const double lr = 1e-2 / step;
        device.backward();
        host.backward();
        on_device.step(lr);
        on_host.step(lr);
      }
      const std::string what = std::string(fused ? "fused" : "reference") + (int8 ? ", int8" : "");
      expect_bitwise_equal(device.w, host.w, what + " w");
      expect_bitwise_equal(device.b, host.b, what + " b");
      const Named a = on_device.state(), b = on_host.state();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].first, b[i].first);
        expect_bitwise_equal(a[i].second, b[i].second, what + " " + a[i].first);
      }
    }
  }
}

TEST(AdamWOffload, LossScaleUnscalesAndAnInfSkipsAsOnTheDevice) {
  Problem device, host;
  AdamW on_device(device.decay(), device.no_decay(), options(false, true));
  AdamW on_host(host.decay(), host.no_decay(), options(true, true));
  const torch::Tensor scale = torch::full({}, 1024.0f), clean = torch::zeros({}), inf = torch::ones({});
  for (const torch::Tensor& found : {clean, inf, clean}) {
    device.backward(1024.0);
    host.backward(1024.0);
    on_device.step(1e-2, scale, found);
    on_host.step(1e-2, scale, found);
  }
  expect_bitwise_equal(device.w, host.w, "w");
  expect_bitwise_equal(on_device.state().back().second, on_host.state().back().second, "step count");
  EXPECT_EQ(on_host.state().back().second.item<float>(), 2.0f);  // the skipped step is not counted
}

TEST(AdamWOffload, StateLivesOnTheHostApartFromTheParameters) {
  Problem p;
  AdamW opt(p.decay(), p.no_decay(), options(true, true));
  p.backward();
  opt.step(1e-2);
  const int64_t elements = p.w.numel() + p.b.numel();
  EXPECT_EQ(opt.device_state_bytes(), 0);
  EXPECT_EQ(opt.state_bytes(), 2 * elements * 4);             // the moments
  EXPECT_EQ(opt.host_state_bytes(), 4 * elements * 4);        // + fp32 masters + gradient staging
  for (const auto& [name, t] : opt.state()) EXPECT_TRUE(t.device().is_cpu()) << name;
  AdamW plain(p.decay(), p.no_decay(), options(false, true));
  EXPECT_EQ(plain.device_state_bytes(), plain.state_bytes());
  EXPECT_EQ(plain.host_state_bytes(), 0);
}

// Weights loaded or restored between steps (copy_ moves the version counter) are what the next
// update starts from, not the stale master.
TEST(AdamWOffload, AParameterWrittenBetweenStepsIsReadBack) {
  Problem device, host;
  AdamW on_device(device.decay(), device.no_decay(), options(false, true));
  AdamW on_host(host.decay(), host.no_decay(), options(true, true));
  for (Problem* p : {&device, &host}) p->backward();
  on_device.step(1e-2);
  on_host.step(1e-2);
  const torch::Tensor restored = torch::randn_like(device.w);
  {
    torch::NoGradGuard no_grad;
    device.w.copy_(restored);
    host.w.copy_(restored);
  }
  for (Problem* p : {&device, &host}) p->backward();
  on_device.step(1e-2);
  on_host.step(1e-2);
  expect_bitwise_equal(device.w, host.w, "w after a restore");
}

TEST(AdamWOffload, CheckpointStateMovesBetweenPlacements) {
  Problem a, b;
  AdamW host(a.decay(), a.no_decay(), options(true, true));
  a.backward();
  host.step(1e-2);
  AdamW device(b.decay(), b.no_decay(), options(false, true));
  device.load_state(host.state());
  AdamW host_again(b.decay(), b.no_decay(), options(true, true));
  host_again.load_state(device.state());
  const Named x = host.state(), y = host_again.state();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) expect_bitwise_equal(x[i].second, y[i].second, x[i].first);
}

TEST(AdamWOffload, InBackwardStepsAreRefused) {
  Problem p;
  AdamW opt(p.decay(), p.no_decay(), options(true, true));
  p.backward();
  EXPECT_THROW(opt.step_parameter(0, 1e-2), ConfigError);
}

}  // namespace offload_test
}  // namespace hwt
