// HardwareAwareOptimizer: the API users know from the field. Give it a model and an
// OptimizationConfig (inside a RunConfig); it detects the hardware, plans, and applies the plan:
//   get_hardware_summary()      what this machine offers (CPU/ISA, memory, BLAS, GPUs)
//   get_optimization_summary()  the plan, each decision with its reason
//   apply_optimizations(model)  process settings, then precision, attention, checkpointing, device
//   get_optimization_metrics()  measured speed and memory, and which optimizations are active
// The CLI's train command goes through exactly this class; examples/ shows a user's own
// torch::nn::Module trained through it with autocast(), backward() and step().
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <memory>
#include <optional>

#include "hwtrain/run/run_config.h"
#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/model/gpt.h"
#include "hwtrain/run/run_bindings.h"
#include "hwtrain/train/autocast.h"
#include "hwtrain/train/callback.h"
#include "hwtrain/train/grad_scaler.h"

namespace hwt {

class HardwareAwareOptimizer {
 public:
  // Plans `config` (model.vocab_size resolved) for `hardware`.
  HardwareAwareOptimizer(RunConfig config, HardwareProfile hardware, PlanContext context = {});
  // Detects this machine's hardware first.
  explicit HardwareAwareOptimizer(RunConfig config, PlanContext context = {});

  const Plan& plan() const { return plan_; }
  const RunConfig& config() const { return config_; }
  const HardwareProfile& hardware() const { return hardware_; }
  torch::Device device() const { return plan_.device; }

  std::string get_hardware_summary() const;
  std::string get_optimization_summary() const;
  // Active optimizations, and measured speed/memory once a MetricsProbe has seen steps.
  nlohmann::json get_optimization_metrics() const;

  // Applies the plan, in this fixed order (each step assumes the previous one):
  //   1. process-wide settings: intra-op threads, TF32, cuDNN benchmark
  //   2. precision of the weights (fp32 master weights; bf16 only with pure_bf16_weights)
  //   3. attention kernel
  //   4. activation checkpointing (after the kernel: the recomputed forward must use it)
  //   5. move to the device
  void apply_optimizations(GPT& model) const;
  // The subset that applies to any module: 1, 2 and 5.
  void apply_optimizations(torch::nn::Module& module) const;
  // Seeds, builds hwtrain's GPT for the plan, and applies the optimizations.
  GPT build_model() const;

  // For a user's own training loop: an autocast region for the planned precision, a scaled
  // backward, and an optimizer step that unscales, clips, skips on inf/NaN and updates the scale,
  // by the same rule as the Trainer (train/update_step.h): in bf16/fp16 a non-finite loss passed
  // to backward() since the last step, or inf/NaN gradients under fp16 loss scaling, skip the update.
  // optimization.autocast_cache applies; cast_inputs and cast_outputs are the Trainer's, a loop of
  // your own casts its inputs and outputs itself.
  std::unique_ptr<AutocastGuard> autocast() const;
  void backward(const torch::Tensor& loss);
  // Returns the gradient norm before clipping; `max_grad_norm` <= 0 disables clipping.
  double step(torch::optim::Optimizer& optimizer, double max_grad_norm = 1.0);
  int64_t skipped_steps() const { return skipped_steps_; }  // updates step() skipped

  // A callback that records measured throughput and memory for get_optimization_metrics().
  std::shared_ptr<Callback> metrics_probe();

 private:
  struct Measured {
    int64_t steps = 0;
    int64_t trainer_skipped = 0;  // updates a Trainer's loss scaler skipped (its StepMetrics)
    double tokens_per_second = 0, mfu = 0, step_seconds = 0, peak_rss_bytes = 0, device_peak_bytes = 0;
  };
  class Probe;
  RunConfig config_;
  HardwareProfile hardware_;
  Plan plan_;
  GradScaler& scaler();                 // for user loops, made on first use
  std::unique_ptr<GradScaler> scaler_;
  bool nonfinite_loss_ = false;         // a non-finite low-precision loss since the last step
  int64_t skipped_steps_ = 0;
  std::shared_ptr<Measured> measured_ = std::make_shared<Measured>();
};

}  // namespace hwt
