#include "hwtrain/train/update_step.h"

#include <cmath>
#include <limits>

namespace hwt {
namespace {

// The global L2 norm of the gradients as a 0-dim tensor on their device, and, with max_norm > 0,
// the gradients scaled by min(1, max_norm / (norm + 1e-6)): the arithmetic of LibTorch's
// clip_grad_norm_ (the same bits) in a few foreach kernels, where clip_grad_norm_ launches two
// kernels per parameter. Nothing here waits for the device.
torch::Tensor clip_global_norm(const std::vector<torch::Tensor>& params, double max_norm,
                               const std::function<torch::Tensor(const torch::Tensor&)>& global_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  torch::Tensor total = torch::zeros({});
  if (!grads.empty()) {
    const auto norms = at::_foreach_norm(grads, 2);
    total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  }
  if (global_norm) total = global_norm(total);
  if (grads.empty()) return total;
  if (max_norm > 0) at::_foreach_mul_(grads, torch::clamp_max(max_norm / (total + 1e-6), 1.0));
  return total;
}

}  // namespace

UpdateOutcome update_after_backward(const std::vector<torch::Tensor>& params, GradScaler& scaler, double loss,
                                    const UpdateRule& rule, const std::function<void()>& update,
                                    const std::function<void()>& zero_grad) {
  UpdateOutcome out;
  scaler.unscale(params);
  scaler.agree_found_inf(rule.sum_across_ranks);
  const torch::Tensor norm = clip_global_norm(params, rule.max_grad_norm, rule.global_norm);
  out.skipped_for_loss = !scaler.found_inf() && rule.low_precision && !std::isfinite(loss);
  if (!scaler.found_inf() && !out.skipped_for_loss) {
    update();
    out.updated = true;
  }
  scaler.update();
  zero_grad();
  out.grad_norm = norm.item<double>();  // read last: the device runs the update meanwhile
  return out;
}

torch::Tensor update_on_device(const std::vector<torch::Tensor>& params, double max_grad_norm, AdamW& optimizer,
                               const torch::Tensor& lr, const torch::Tensor& found_inf) {
  torch::Tensor norm = clip_global_norm(params, max_grad_norm, nullptr);
  optimizer.step_on_device(lr, found_inf);
  return norm;
}

}  // namespace hwt
