#include "hwtrain/train/optimizer_in_backward.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <cmath>

namespace hwt {

struct OptimizerInBackward::State {
  AdamW* optimizer = nullptr;
  double lr = 0;
  int64_t updated = 0;
  torch::Tensor sum_of_squares;  // fp32 scalar on the parameters' device: no sync per parameter
};

namespace {

struct StepHook : torch::autograd::PostAccumulateGradHook {
  StepHook(std::shared_ptr<OptimizerInBackward::State> state, size_t index)
      : state_(std::move(state)), index_(index) {}

  void operator()(const torch::autograd::Variable& param) override {
    const torch::Tensor& grad = param.grad();
    if (!grad.defined()) return;
    {
      torch::NoGradGuard no_grad;
      state_->sum_of_squares.add_(at::linalg_vector_norm(grad, 2, std::nullopt, false, at::kFloat).square());
    }
    ++state_->updated;  // first: a step that throws half-way still counts as having touched the weights
    state_->optimizer->step_parameter(index_, state_->lr);
    param.mutable_grad() = torch::Tensor();  // the point of it all: this gradient's memory is free now
  }

 private:
  std::shared_ptr<OptimizerInBackward::State> state_;
  size_t index_;
};

}  // namespace

OptimizerInBackward::OptimizerInBackward(AdamW& optimizer) : state_(std::make_shared<State>()) {
  state_->optimizer = &optimizer;
  const auto named = optimizer.named_parameters();
  TORCH_CHECK(!named.empty(), "optimizer in backward: the optimizer has no parameters");
  state_->sum_of_squares = torch::zeros({}, named.front().second.options().dtype(torch::kFloat32));
  // Every check before the first hook, so that a refusal leaves no hook behind.
  for (const auto& [name, p] : named) {
    TORCH_CHECK(p.is_leaf() && p.requires_grad(), "optimizer in backward: parameter '", name,
                "' is not a leaf that requires a gradient");
    TORCH_CHECK(!torch::autograd::impl::post_acc_grad_hooks(p),
                "optimizer in backward: parameter '", name, "' already has a post-accumulate hook");
  }
  for (size_t i = 0; i < named.size(); ++i) {
    torch::autograd::impl::set_post_acc_grad_hooks(named[i].second, std::make_unique<StepHook>(state_, i));
    params_.push_back(named[i].second);
  }
}

OptimizerInBackward::~OptimizerInBackward() {
  for (const auto& p : params_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

void OptimizerInBackward::begin_step(double lr) {
  state_->lr = lr;
  state_->updated = 0;
  state_->sum_of_squares.zero_();
}

int64_t OptimizerInBackward::parameters_updated() const { return state_->updated; }

double OptimizerInBackward::grad_norm() const { return std::sqrt(state_->sum_of_squares.item<double>()); }

}  // namespace hwt
