#include "hwtrain/train/update_step.h"

#include <cmath>
#include <limits>

namespace hwt {

UpdateOutcome update_after_backward(const std::vector<torch::Tensor>& params, GradScaler& scaler, double loss,
                                    const UpdateRule& rule, const std::function<void()>& update,
                                    const std::function<void()>& zero_grad) {
  UpdateOutcome out;
  scaler.unscale(params);
  out.grad_norm = rule.max_grad_norm > 0
                      ? torch::nn::utils::clip_grad_norm_(params, rule.max_grad_norm, 2.0, /*error_if_nonfinite=*/false)
                      : torch::nn::utils::clip_grad_norm_(params, std::numeric_limits<double>::infinity());
  out.skipped_for_loss = !scaler.found_inf() && rule.low_precision && !std::isfinite(loss);
  if (!scaler.found_inf() && !out.skipped_for_loss) {
    update();
    out.updated = true;
  }
  scaler.update();
  zero_grad();
  return out;
}

}  // namespace hwt
