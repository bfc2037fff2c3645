// OptimizationConfig: the hardware-facing choices, as the field names them. "auto" (or -1 for
// counts) lets the planner decide from the hardware; any value the user sets explicitly wins.
// Header-only plain struct: config/ binds it, plan/ reads it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/core/option_checks.h"
#include "hwtrain/plan/plan.h"

namespace hwt {

struct OptimizationConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  // One choice, one key: optimization.enable_mixed_precision = false is fp32's deprecated alias.
  std::optional<Precision> mixed_precision_dtype;  // empty = auto
  bool pure_bf16_weights = false;
  // Loss scaling: PyTorch's GradScaler defaults.
  bool dynamic_loss_scale = true;
  double loss_scale_init = 65536.0;
  double loss_scale_growth_factor = 2.0;
  double loss_scale_backoff_factor = 0.5;
  int64_t loss_scale_growth_interval = 2000;
  int64_t nonfinite_fallback_steps = 3;
  // Bounds of the dynamic scale (the seeds' GradScaler options); 0 = unbounded, as PyTorch's.
  double min_loss_scale = 0.0;
  double max_loss_scale = 0.0;
  // The seeds' autocast switches (train/autocast.h).
  bool cast_inputs = false;
  bool cast_outputs = true;
  bool autocast_cache = true;
  // optimization.enable_gradient_checkpointing is its deprecated alias (true = 1 unless set, false = 0).
  int64_t checkpoint_every = -1;
  bool fused_lm_head_loss = false;
  int64_t target_batch_size = 0;
  int64_t max_batch_size = 64;
  double memory_threshold = 0.75;
  bool auto_batch_size = false;
  int64_t num_workers = -1;
  int64_t prefetch_factor = 2;
  bool pin_memory = true;
  int64_t intra_op_threads = 0;
  std::optional<StateDevice> optimizer_state_device;  // empty = auto
  std::optional<StateDtype> optimizer_state_dtype;    // empty = auto
  bool fused_optimizer = true;
  // See train/optimizer_in_backward.h.
  bool optimizer_in_backward = false;
  bool cuda_graphs = false;
  bool allow_tf32 = true;
  bool cudnn_benchmark = true;
  bool deterministic = false;

  void validate() const {
    check_at_least("optimization.checkpoint_every", checkpoint_every, -1);
    check_at_least("optimization.target_batch_size", target_batch_size, 0);
    check_at_least("optimization.max_batch_size", max_batch_size, 1);
    if (!(memory_threshold > 0 && memory_threshold <= 1)) {
      option_range_error("optimization.memory_threshold", option_text(memory_threshold), "must be in (0, 1]");
    }
    check_at_least("optimization.num_workers", num_workers, -1);
    check_at_least("optimization.prefetch_factor", prefetch_factor, 1);
    check_at_least("optimization.intra_op_threads", intra_op_threads, 0);
    check_at_least("optimization.nonfinite_fallback_steps", nonfinite_fallback_steps, 0);
    check_loss_scaler();
    check_loss_scale_bounds();
  }

  // As PyTorch's GradScaler requires: a positive scale that grows (> 1) and backs off (in (0, 1)).
  void check_loss_scaler() const {
    if (!(loss_scale_init > 0)) {
      option_range_error("optimization.loss_scale_init", option_text(loss_scale_init), "must be > 0");
    }
    if (!(loss_scale_growth_factor > 1)) {
      option_range_error("optimization.loss_scale_growth_factor", option_text(loss_scale_growth_factor), "must be > 1");
    }
    if (!(loss_scale_backoff_factor > 0 && loss_scale_backoff_factor < 1)) {
      option_range_error("optimization.loss_scale_backoff_factor", option_text(loss_scale_backoff_factor),
                         "must be in (0, 1)");
    }
    check_at_least("optimization.loss_scale_growth_interval", loss_scale_growth_interval, 1);
  }

  // min_loss_scale <= loss_scale_init <= max_loss_scale, where a bound is set (> 0).
  void check_loss_scale_bounds() const {
    check_non_negative("optimization.min_loss_scale", min_loss_scale, "0 = no floor");
    check_non_negative("optimization.max_loss_scale", max_loss_scale, "0 = no cap");
    if (max_loss_scale > 0 && min_loss_scale > max_loss_scale) {
      option_range_error("optimization.min_loss_scale", option_text(min_loss_scale),
                         "must not exceed optimization.max_loss_scale = " + option_text(max_loss_scale));
    }
    if (loss_scale_init < min_loss_scale || (max_loss_scale > 0 && loss_scale_init > max_loss_scale)) {
      option_range_error("optimization.loss_scale_init", option_text(loss_scale_init),
                         "must lie within [min_loss_scale, max_loss_scale] = [" + option_text(min_loss_scale) + ", " +
                             (max_loss_scale > 0 ? option_text(max_loss_scale) : std::string("unbounded")) + "]");
    }
  }

  template <class V>
  void visit(V& v) {
    v("mixed_precision_dtype", mixed_precision_dtype, "autocast dtype; fp32 = off, auto = the planner's choice "
      "(optimization.amp_level = O0 | O1 | O2 | O3 is an alias: fp32 | auto | bf16 with pure_bf16_weights | "
      "that with int8 optimizer_state_dtype)");
    v("pure_bf16_weights", pure_bf16_weights, "keep weights in bf16 without an fp32 master copy (with bf16 only); "
      "the optimizer moments stay as optimizer_state_dtype says");
    v("dynamic_loss_scale", dynamic_loss_scale, "fp16: grow/back off the loss scale (false = static)");
    v("loss_scale_init", loss_scale_init, "fp16: initial (or static) loss scale");
    v("loss_scale_growth_factor", loss_scale_growth_factor, "fp16: scale growth after growth_interval clean steps");
    v("loss_scale_backoff_factor", loss_scale_backoff_factor, "fp16: scale backoff after inf/NaN gradients");
    v("loss_scale_growth_interval", loss_scale_growth_interval, "fp16: clean steps before the scale grows");
    v("min_loss_scale", min_loss_scale, "fp16: the dynamic scale never backs off below this (0 = no floor)");
    v("max_loss_scale", max_loss_scale, "fp16: the dynamic scale never grows above this (0 = no cap)");
    v("cast_inputs", cast_inputs, "under autocast, floating-point batch inputs are cast to the autocast dtype "
      "before the forward (token ids are integers and stay as they are)");
    v("cast_outputs", cast_outputs, "under autocast, the model's output is cast to fp32 before the loss (a "
      "user's module through ModuleModel; the built-in models always compute their loss in fp32)");
    v("autocast_cache", autocast_cache, "autocast keeps the low-precision copy of each weight for the rest of "
      "the forward (PyTorch's cache_enabled); false recasts at every use: less memory, more casts");
    v("nonfinite_fallback_steps", nonfinite_fallback_steps,
      "fall back to fp32 after this many consecutive non-finite losses (0 = never)");
    v("checkpoint_every", checkpoint_every,
      "recompute activations in backward for every k-th block (1 = all); 0 = off, -1 = the planner decides "
      "(only where memory needs it)");
    v("fused_lm_head_loss", fused_lm_head_loss,
      "LM head + cross-entropy in chunks of tokens, gradients in the same pass (no whole logits tensor; the "
      "planner turns it on when logits do not fit)");
    v("target_batch_size", target_batch_size, "global batch size in sequences; 0 = micro x accum");
    v("max_batch_size", max_batch_size, "upper bound of the micro-batch search");
    v("memory_threshold", memory_threshold, "fraction of available memory the plan may use");
    v("auto_batch_size", auto_batch_size, "probe for the largest micro-batch that fits");
    v("num_workers", num_workers, "data loader threads; -1 = planner");
    v("prefetch_factor", prefetch_factor, "batches queued per loader thread");
    v("pin_memory", pin_memory, "pinned host memory for batches on CUDA");
    v("intra_op_threads", intra_op_threads, "LibTorch intra-op threads; 0 = the physical cores usable by "
      "this process");
    v("optimizer_state_device", optimizer_state_device, "where optimizer moments live: device, cpu (host "
      "memory with fp32 masters, the update on the host, as ZeRO-Offload) or auto (cpu on a GPU only when "
      "nothing else makes the model fit)");
    v("optimizer_state_dtype", optimizer_state_dtype,
      "AdamW moments: fp32, int8 (block-wise 8-bit as bitsandbytes' 8-bit AdamW: a quarter of the memory) or "
      "auto (fp32 unless only int8 makes the model fit)");
    v("fused_optimizer", fused_optimizer, "use the fused AdamW kernel (at::_fused_adamw_) where available");
    v("optimizer_in_backward", optimizer_in_backward,
      "step each parameter as soon as backward has its gradient, then free it, so the gradients never exist "
      "all at once (needs train.grad_clip = 0, one micro-batch per step, one process, no fp16)");
    v("cuda_graphs", cuda_graphs, "capture the training step (forward, backward, clipping, AdamW) as one CUDA graph "
      "after 3 eager steps and replay it: one GPU, bf16 or fp32, fused AdamW on the device; the plan says why not otherwise");
    v("allow_tf32", allow_tf32, "TF32 matmuls on Ampere or later");
    v("cudnn_benchmark", cudnn_benchmark, "cuDNN autotuning");
    v("deterministic", deterministic,
      "deterministic algorithms only (bitwise-repeatable steps on CUDA; slower; cuDNN autotuning off)");
  }
};

}  // namespace hwt
