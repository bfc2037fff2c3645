// GradScaler: dynamic loss scaling for fp16 training, as Python's torch.amp.GradScaler, which the
// C++ frontend lacks. Built on ATen's fused ops (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_). Steps whose gradients hold inf/NaN are skipped and counted. A disabled
// scaler (bf16, fp32) is a no-op with scale 1.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace hwt {

struct GradScalerOptions {
  bool enabled = true;
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool dynamic = true;          // false: static scale, never updated
  double min_scale = 0.0;       // the dynamic scale never backs off below this; 0 = no floor
  double max_scale = 0.0;       // nor grows above this; 0 = no cap
};

class GradScaler {
 public:
  GradScaler(GradScalerOptions options, torch::Device device);

  bool enabled() const { return options_.enabled; }
  // loss * scale (the loss itself when disabled).
  torch::Tensor scale(const torch::Tensor& loss) const;
  // Divides the gradients by the scale in place and records whether any is inf/NaN. Call once
  // per optimizer step, before clipping.
  void unscale(const std::vector<torch::Tensor>& params);
  // Gradients sharded over ranks (ZeRO-2/3): after unscale, every rank's verdict summed in place by
  // `sum_across_ranks` (collective), so that all skip or step together.
  void agree_found_inf(const std::function<void(torch::Tensor&)>& sum_across_ranks);
  // True when the last unscale found inf/NaN: the optimizer step must be skipped.
  bool found_inf() const;
  // Updates the scale (backoff after inf/NaN, growth after growth_interval clean steps, kept within
  // [min_scale, max_scale] where set); counts
  // skipped steps. Call once per optimizer step, after the (possibly skipped) step.
  void update();

  double current_scale() const;
  int64_t skipped_steps() const { return skipped_steps_; }

  // Checkpoint state: scale, growth tracker, skipped count.
  std::vector<std::pair<std::string, torch::Tensor>> state() const;
  void load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state);

 private:
  GradScalerOptions options_;
  torch::Tensor scale_;           // fp32 scalar on the device
  torch::Tensor growth_tracker_;  // int32 scalar on the device
  torch::Tensor found_inf_;       // fp32 scalar on the device
  int64_t skipped_steps_ = 0;
  bool unscaled_ = false;
};

}  // namespace hwt
