// The placement check names the first tensor off the planned device.
#include "hwtrain/train/device_placement.h"

#include <gtest/gtest.h>

#include "hwtrain/core/error.h"

namespace hwt {
namespace {

TEST(DevicePlacement, CudaWithoutIndexMatchesAnyCudaDevice) {
  EXPECT_TRUE(on_planned_device(torch::Device("cuda:1"), torch::Device("cuda")));
  EXPECT_TRUE(on_planned_device(torch::Device("cuda:0"), torch::Device("cuda:0")));
  EXPECT_FALSE(on_planned_device(torch::Device("cuda:1"), torch::Device("cuda:0")));
  EXPECT_FALSE(on_planned_device(torch::Device("cpu"), torch::Device("cuda:0")));
  EXPECT_TRUE(on_planned_device(torch::Device("cpu"), torch::Device("cpu")));
}

TEST(DevicePlacement, NamesTheTensorOffTheDevice) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors{
      {"wte.weight", torch::zeros({2, 2})},
      {"grad.unset", torch::Tensor()},  // skipped: nothing to place yet
      {"h.0.attn.c_attn.weight", torch::empty({2, 2}, torch::Device(torch::kMeta))}};
  EXPECT_NO_THROW(verify_placement("model tensor", {tensors[0], tensors[1]}, torch::kCPU));
  try {
    verify_placement("model tensor", tensors, torch::kCPU);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model tensor 'h.0.attn.c_attn.weight' is on meta but the plan trains on cpu"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace hwt
