// Reentrant activation checkpointing: a custom autograd Function that recomputes in backward.
#include "hwtrain/model/activation_checkpoint.h"

#include <optional>

#include "hwtrain/model/autocast_state.h"

namespace hwt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The default generator of `device` (CPU, or a CUDA device).
at::Generator default_generator(const torch::Device& device) {
  if (device.is_cpu()) return at::detail::getDefaultCPUGenerator();
  return at::globalContext().defaultGenerator(device);
}

torch::Tensor get_rng_state(const torch::Device& device) {
  auto gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_rng_state(const torch::Device& device, const torch::Tensor& state) {
  auto gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Sets the generators to the forward pass's states for a scope, then puts the current ones back,
// so recomputing does not disturb the random stream of the rest of training (Python's fork_rng).
class RngForkGuard {
 public:
  RngForkGuard(const torch::Tensor& cpu_state, const std::optional<torch::Device>& cuda_device,
               const torch::Tensor& cuda_state)
      : cuda_device_(cuda_device) {
    cpu_saved_ = get_rng_state(torch::kCPU);
    set_rng_state(torch::kCPU, cpu_state);
    if (cuda_device_) {
      cuda_saved_ = get_rng_state(*cuda_device_);
      set_rng_state(*cuda_device_, cuda_state);
    }
  }
  ~RngForkGuard() {
    set_rng_state(torch::kCPU, cpu_saved_);
    if (cuda_device_) set_rng_state(*cuda_device_, cuda_saved_);
  }
  RngForkGuard(const RngForkGuard&) = delete;
  RngForkGuard& operator=(const RngForkGuard&) = delete;

 private:
  std::optional<torch::Device> cuda_device_;
  torch::Tensor cpu_saved_, cuda_saved_;
};

// What backward needs besides the saved input; travels in the context as an IValue capsule.
struct CheckpointState : torch::CustomClassHolder {
  TensorFn fn;
  std::vector<torch::Tensor> params;
  AutocastState autocast;
  torch::Tensor cpu_rng_state;
  std::optional<torch::Device> cuda_device;
  torch::Tensor cuda_rng_state;
};

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  // Inputs seen by autograd: x, each of params, and the state (not a tensor).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               torch::TensorList params, c10::intrusive_ptr<CheckpointState> state) {
    state->autocast = AutocastState::current();
    state->cpu_rng_state = get_rng_state(torch::kCPU);
    if (x.is_cuda()) {
      state->cuda_device = x.device();
      state->cuda_rng_state = get_rng_state(x.device());
    }
    ctx->save_for_backward({x});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    torch::NoGradGuard no_grad;
    return state->fn(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(
        ctx->saved_data["state"].toCapsule());
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const size_t num_params = state->params.size();
    variable_list result(num_params + 2);  // x, params..., state

    auto x_detached = x.detach().requires_grad_(x.requires_grad());
    torch::Tensor y;
    {
      RngForkGuard rng(state->cpu_rng_state, state->cuda_device, state->cuda_rng_state);
      AutocastStateGuard autocast(state->autocast);
      torch::AutoGradMode enable_grad(true);
      y = state->fn(x_detached);
    }

    variable_list wrt;
    std::vector<size_t> slot;  // where each gradient goes in result
    if (x_detached.requires_grad()) {
      wrt.push_back(x_detached);
      slot.push_back(0);
    }
    for (size_t i = 0; i < num_params; ++i) {
      if (state->params[i].requires_grad()) {
        wrt.push_back(state->params[i]);
        slot.push_back(i + 1);
      }
    }
    if (wrt.empty() || !y.requires_grad()) return result;
    auto grad_y = grad_outputs[0].defined() ? grad_outputs[0] : torch::zeros_like(y);
    auto grads = torch::autograd::grad({y}, wrt, {grad_y}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t i = 0; i < grads.size(); ++i) result[slot[i]] = grads[i];
    return result;
  }
};

}  // namespace

torch::Tensor checkpointed(const TensorFn& fn, const torch::Tensor& x,
                           const std::vector<torch::Tensor>& params) {
  auto state = c10::make_intrusive<CheckpointState>();
  state->fn = fn;
  state->params = params;
  return CheckpointFunction::apply(x, torch::TensorList(params), state);
}

}  // namespace hwt
