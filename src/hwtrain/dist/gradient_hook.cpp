#include "hwtrain/dist/gradient_hook.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "hwtrain/core/error.h"

namespace hwt {

GradientHook::GradientHook(const torch::Tensor& param, std::function<void()> ready, const std::string& what) {
  accumulator_ = param.requires_grad() ? torch::autograd::impl::grad_accumulator(param) : nullptr;
  if (!accumulator_) throw ConfigError(what + " is not a leaf tensor that requires a gradient");
  auto hook = std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [ready = std::move(ready)](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
        ready();
        return outputs;
      });
  key_ = accumulator_->add_post_hook(std::move(hook));
}

GradientHook::GradientHook(GradientHook&& other) noexcept
    : accumulator_(std::move(other.accumulator_)), key_(other.key_) {}

GradientHook::~GradientHook() {
  if (accumulator_) accumulator_->del_post_hook(key_);
}

}  // namespace hwt
