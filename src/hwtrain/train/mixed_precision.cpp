#include "hwtrain/train/mixed_precision.h"

#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/train/autocast.h"

namespace hwt {

nlohmann::json MixedPrecisionStatus::to_json() const {
  return {{"enabled", enabled},
          {"dtype", dtype},
          {"planned_dtype", planned_dtype},
          {"loss_scaling", loss_scaling},
          {"loss_scale", loss_scale},
          {"skipped_steps", skipped_steps},
          {"consecutive_nonfinite", consecutive_nonfinite},
          {"hardware_bf16", hardware_bf16},
          {"hardware_fp16", hardware_fp16},
          {"fallback_reason", fallback_reason}};
}

GradScalerOptions scaler_options(const LossScaling& l) {
  GradScalerOptions o;
  o.dynamic = l.dynamic;
  o.init_scale = l.init_scale;
  o.growth_factor = l.growth_factor;
  o.backoff_factor = l.backoff_factor;
  o.growth_interval = l.growth_interval;
  o.min_scale = l.min_scale;
  o.max_scale = l.max_scale;
  return o;
}

MixedPrecision::MixedPrecision(const Plan& plan)
    : planned_(plan.precision),
      current_(plan.precision),
      device_(plan.device),
      scaler_options_(scaler_options(plan.loss_scaling)),
      fallback_after_(plan.loss_scaling.nonfinite_fallback_steps),
      hardware_bf16_(plan.hardware_bf16),
      hardware_fp16_(plan.hardware_fp16) {
  scaler_options_.enabled = current_ == Precision::Fp16;
  scaler_ = std::make_unique<GradScaler>(scaler_options_, device_);
}

c10::ScalarType MixedPrecision::autocast_dtype() const { return hwt::autocast_dtype(current_); }

void MixedPrecision::enable(Precision p) {
  if (p == current_) return;
  if (!pinned_.empty()) throw ConfigError(std::string("cannot switch to ") + precision_name(p) + ": " + pinned_);
  skipped_before_ += scaler_->skipped_steps();
  current_ = p;
  scaler_options_.enabled = p == Precision::Fp16;
  scaler_ = std::make_unique<GradScaler>(scaler_options_, device_);
  consecutive_nonfinite_ = 0;
  log_info("mixed precision: autocast {}", p == Precision::Fp32 ? "off (fp32)" : precision_name(p));
}

MixedPrecisionStatus MixedPrecision::status() const {
  MixedPrecisionStatus s;
  s.enabled = current_ != Precision::Fp32;
  s.dtype = precision_name(current_);
  s.planned_dtype = precision_name(planned_);
  s.loss_scaling = scaler_->enabled();
  s.loss_scale = scaler_->current_scale();
  s.skipped_steps = skipped_steps();
  s.consecutive_nonfinite = consecutive_nonfinite_;
  s.hardware_bf16 = hardware_bf16_;
  s.hardware_fp16 = hardware_fp16_;
  s.fallback_reason = fallback_reason_;
  return s;
}

void MixedPrecision::fall_back(const std::string& reason) {
  if (!pinned_.empty()) throw HardwareError(reason + ", and training cannot fall back to fp32: " + pinned_);
  fallback_reason_ = reason;
  log_warn("mixed precision: {}; continuing in fp32", reason);
  enable(Precision::Fp32);
}

bool MixedPrecision::note_step(bool loss_finite) {
  if (loss_finite) {
    consecutive_nonfinite_ = 0;
    return false;
  }
  ++consecutive_nonfinite_;
  if (fallback_after_ <= 0 || consecutive_nonfinite_ < fallback_after_) return false;
  if (current_ == Precision::Fp32) {  // nothing to fall back to: the run has diverged
    throw Error("training diverged: " + std::to_string(consecutive_nonfinite_) +
                " consecutive steps had a non-finite loss in fp32 (optimization.nonfinite_fallback_steps = " +
                std::to_string(fallback_after_) + "); lower train.lr or raise train.warmup_steps, and resume "
                "from a checkpoint saved before (none is saved after a non-finite loss)");
  }
  fall_back(std::to_string(consecutive_nonfinite_) + " consecutive steps had a non-finite loss in " +
            precision_name(current_) + " (optimization.nonfinite_fallback_steps = " + std::to_string(fallback_after_) +
            ")");
  return true;
}

bool MixedPrecision::is_unsupported_dtype_error(const std::exception& e) {
  const std::string what = e.what();
  const bool no_kernel = what.find("not implemented for") != std::string::npos ||
                         what.find("does not support") != std::string::npos ||
                         what.find("Unsupported dtype") != std::string::npos;
  const bool low_precision = what.find("BFloat16") != std::string::npos || what.find("Half") != std::string::npos ||
                             what.find("bfloat16") != std::string::npos || what.find("float16") != std::string::npos;
  return no_kernel && low_precision;
}

}  // namespace hwt
