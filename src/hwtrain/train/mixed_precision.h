// MixedPrecision: the trainer's precision state at run time, as the field's
// enable_mixed_precision() / disable_mixed_precision() / get_mixed_precision_status(): the autocast
// dtype in force, the loss scaler that goes with it (enabled for fp16 only: bf16 has fp32's
// exponent range), and the automatic fallback to fp32 when low precision cannot train:
//   - an operation without a kernel for the autocast dtype ("... not implemented for 'BFloat16'"):
//     the trainer redoes the step in fp32 at once;
//   - K consecutive steps with a non-finite loss (what loss scaling cannot fix: the forward
//     itself overflows): those steps' updates are skipped, so the weights stay the last good ones,
//     and training continues in fp32.
// Master weights stay fp32 (or bf16 with pure_bf16_weights); switching changes only the autocast.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "hwtrain/plan/plan.h"
#include "hwtrain/train/grad_scaler.h"

namespace hwt {

struct MixedPrecisionStatus {
  bool enabled = false;             // autocast active
  std::string dtype = "fp32";       // autocast dtype in force
  std::string planned_dtype = "fp32";
  bool loss_scaling = false;        // dynamic or static loss scaling active (fp16)
  double loss_scale = 1.0;
  int64_t skipped_steps = 0;        // optimizer steps skipped for non-finite gradients or loss
  int64_t consecutive_nonfinite = 0;
  bool hardware_bf16 = false;       // the hardware runs bf16 natively (from the plan)
  bool hardware_fp16 = false;
  std::string fallback_reason;      // why training fell back to fp32; empty if it did not
  nlohmann::json to_json() const;
};

// The GradScaler options of the plan's loss scaling (enabled is decided by the dtype in force).
GradScalerOptions scaler_options(const LossScaling& loss_scaling);

class MixedPrecision {
 public:
  // The plan's device, precision and loss scaling (its nonfinite_fallback_steps: K consecutive
  // non-finite steps before falling back to fp32, 0 = never).
  explicit MixedPrecision(const Plan& plan);

  c10::ScalarType autocast_dtype() const;
  Precision precision() const { return current_; }
  GradScaler& scaler() { return *scaler_; }
  const GradScaler& scaler() const { return *scaler_; }

  // Between steps only. enable() switches to `p` (the plan's precision by default); the loss
  // scaler starts afresh when the dtype changes. disable() = fp32.
  void enable(Precision p);
  void enable() { enable(planned_); }
  void disable() { enable(Precision::Fp32); }
  MixedPrecisionStatus status() const;
  // Optimizer steps skipped so far (non-finite gradients or loss), across dtype switches.
  int64_t skipped_steps() const { return skipped_before_ + scaler_->skipped_steps() + extra_skipped_; }

  // After each step: whether its loss was finite. Returns true when this step completed K
  // consecutive non-finite steps and training has just switched to fp32; in fp32 already, K
  // consecutive non-finite steps throw Error (the run diverged; K = 0: never).
  bool note_step(bool loss_finite);
  // Counts a step whose update was skipped for a non-finite loss (the scaler counts its own).
  void count_skipped() { ++extra_skipped_; }
  // Switches to fp32 for good (enable() can still switch back) and records why.
  void fall_back(const std::string& reason);
  // The precision can no longer change (ZeRO-2/3 hold their parameters in its dtype): enable()
  // throws ConfigError and a fallback HardwareError, each with `why`.
  void pin(const std::string& why) { pinned_ = why; }

  // True for errors of an operation that has no kernel for a low-precision dtype.
  static bool is_unsupported_dtype_error(const std::exception& e);

 private:
  Precision planned_, current_;
  torch::Device device_;
  GradScalerOptions scaler_options_;
  std::unique_ptr<GradScaler> scaler_;
  int64_t fallback_after_;
  int64_t consecutive_nonfinite_ = 0;
  int64_t extra_skipped_ = 0;
  int64_t skipped_before_ = 0;  // skipped steps of scalers replaced by enable()
  bool hardware_bf16_, hardware_fp16_;
  std::string fallback_reason_;
  std::string pinned_;  // non-empty: why the precision cannot change
};

}  // namespace hwt
