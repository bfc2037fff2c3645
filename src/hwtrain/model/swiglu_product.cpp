// silu(gate) * up with silu(gate) recomputed in backward instead of saved.
#include "hwtrain/model/swiglu_product.h"

namespace hwt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct SiluTimes : public torch::autograd::Function<SiluTimes> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate, const torch::Tensor& up) {
    ctx->save_for_backward({gate, up});
    return at::silu(gate) * up;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& gate = saved[0];
    const torch::Tensor& up = saved[1];
    const torch::Tensor& grad = grads[0];
    torch::Tensor grad_gate, grad_up;
    if (ctx->needs_input_grad(0)) grad_gate = at::silu_backward(grad * up, gate);
    if (ctx->needs_input_grad(1)) grad_up = grad * at::silu(gate);
    return {grad_gate, grad_up};
  }
};

}  // namespace

// Without a graph (no grad mode, or neither input requiring a gradient) apply records no node.
torch::Tensor swiglu_product(const torch::Tensor& gate, const torch::Tensor& up) { return SiluTimes::apply(gate, up); }

}  // namespace hwt
