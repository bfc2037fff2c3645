// Reentrant activation checkpointing: a custom autograd Function that recomputes in backward.
#include "hwtrain/model/activation_checkpoint.h"


#include "hwtrain/model/autocast_state.h"
#include "hwtrain/model/rng_state.h"

namespace hwt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Sets the generators to the forward pass's states for a scope, then puts the current ones back,
// so recomputing does not disturb the random stream of the rest of training (Python's fork_rng).
class RngForkGuard {
 public:
  RngForkGuard(const RngState& forward_state, const torch::Device& device)
      : device_(device), saved_(rng_state(device)) {
    set_rng_state(forward_state, device_);
  }
  ~RngForkGuard() { set_rng_state(saved_, device_); }
  RngForkGuard(const RngForkGuard&) = delete;
  RngForkGuard& operator=(const RngForkGuard&) = delete;

 private:
  torch::Device device_;
  RngState saved_;
};

// What backward needs besides the saved input; travels in the context as an IValue capsule.
struct CheckpointState : torch::CustomClassHolder {
  TensorFn fn;
  std::vector<torch::Tensor> params;
  AutocastState autocast;
  torch::Device device{torch::kCPU};  // the input's: its generator (and the CPU's) are forked
  RngState rng;
};

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  // Inputs seen by autograd: x, each of params, and the state (not a tensor).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               torch::TensorList params, c10::intrusive_ptr<CheckpointState> state) {
    state->autocast = AutocastState::current();
    state->device = x.device();
    state->rng = rng_state(x.device());
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
      RngForkGuard rng(state->rng, state->device);
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
