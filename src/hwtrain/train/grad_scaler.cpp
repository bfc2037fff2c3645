#include "hwtrain/train/grad_scaler.h"

#include <map>

#include "hwtrain/core/error.h"

namespace hwt {

GradScaler::GradScaler(GradScalerOptions options, torch::Device device) : options_(options) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  scale_ = torch::full({}, options_.enabled ? options_.init_scale : 1.0, f32);
  growth_tracker_ = torch::zeros({}, f32.dtype(torch::kInt32));
  found_inf_ = torch::zeros({}, f32);
}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) const {
  if (!options_.enabled) return loss;
  return loss * scale_.to(loss.scalar_type());
}

void GradScaler::unscale(const std::vector<torch::Tensor>& params) {
  found_inf_.zero_();
  unscaled_ = true;
  if (!options_.enabled) return;
  torch::NoGradGuard no_grad;
  auto inv_scale = scale_.reciprocal();
  // The fused op takes tensors of one dtype and device per call.
  std::map<std::pair<int, int>, std::vector<torch::Tensor>> groups;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    auto g = p.grad();
    groups[{static_cast<int>(g.scalar_type()), static_cast<int>(g.device().type())}].push_back(g);
  }
  for (auto& [key, grads] : groups) at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
}

void GradScaler::agree_found_inf(const std::function<void(torch::Tensor&)>& sum_across_ranks) {
  if (options_.enabled && sum_across_ranks) sum_across_ranks(found_inf_);
}

bool GradScaler::found_inf() const { return found_inf_.item<float>() != 0.0f; }

void GradScaler::update() {
  if (!options_.enabled) return;
  if (!unscaled_) throw std::logic_error("GradScaler::update called without unscale");
  unscaled_ = false;
  if (found_inf()) ++skipped_steps_;
  if (!options_.dynamic) return;
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, options_.growth_factor, options_.backoff_factor,
                         options_.growth_interval);
  // On the device, no synchronization: a step skipped at the floor is still skipped.
  if (options_.min_scale > 0) scale_.clamp_min_(options_.min_scale);
  if (options_.max_scale > 0) scale_.clamp_max_(options_.max_scale);
}

double GradScaler::current_scale() const { return scale_.item<double>(); }

std::vector<std::pair<std::string, torch::Tensor>> GradScaler::state() const {
  return {{"scaler.scale", scale_.cpu()},
          {"scaler.growth_tracker", growth_tracker_.cpu()},
          {"scaler.skipped_steps", torch::full({}, skipped_steps_, torch::kInt64)}};
}

void GradScaler::load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state) {
  std::map<std::string, torch::Tensor> m(state.begin(), state.end());
  for (const char* key : {"scaler.scale", "scaler.growth_tracker", "scaler.skipped_steps"}) {
    if (!m.count(key)) throw IoError(std::string("checkpoint lacks '") + key + "'");
  }
  scale_.copy_(m["scaler.scale"]);
  growth_tracker_.copy_(m["scaler.growth_tracker"]);
  skipped_steps_ = m["scaler.skipped_steps"].item<int64_t>();
}

}  // namespace hwt
