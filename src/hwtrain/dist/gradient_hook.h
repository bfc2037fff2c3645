// GradientHook: calls a function each time autograd has accumulated a parameter's gradient (a post
// hook on the parameter's gradient accumulator, as PyTorch's DDP and FSDP use), removed when the
// GradientHook is destroyed. What data parallelism (ddp.h) and sharding (sharded_parameters.h)
// start their reductions from.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

namespace hwt {

class GradientHook {
 public:
  // `param` must be a leaf that requires a gradient (ConfigError naming `what` otherwise).
  GradientHook(const torch::Tensor& param, std::function<void()> ready, const std::string& what);
  ~GradientHook();
  GradientHook(GradientHook&& other) noexcept;
  GradientHook& operator=(GradientHook&&) = delete;
  GradientHook(const GradientHook&) = delete;
  GradientHook& operator=(const GradientHook&) = delete;

 private:
  std::shared_ptr<torch::autograd::Node> accumulator_;
  uintptr_t key_ = 0;
};

}  // namespace hwt
