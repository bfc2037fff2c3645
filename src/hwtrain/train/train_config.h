// TrainConfig: the optimization loop's options. Header-only plain struct.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/core/enum_names.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"

namespace hwt {

// The learning rate after the linear warmup: cosine or linear decay to min_lr, or constant.
enum class LrSchedule { kCosine, kLinear, kConstant };
template <>
struct EnumNames<LrSchedule> {
  static constexpr std::array<std::pair<LrSchedule, const char*>, 3> table{{
      {LrSchedule::kCosine, "cosine"},
      {LrSchedule::kLinear, "linear"},
      {LrSchedule::kConstant, "constant"}}};
};

struct TrainConfig {
  // Each option's description is its visit() line below (`hwtrain train --help-config` prints it).
  int64_t max_steps = 3000;
  // 285 s: the default run then reaches val_loss < 2.0 within 5 minutes on 2 cores.
  double time_budget = 285.0;
  int64_t micro_batch_size = 16;
  int64_t grad_accum_steps = 1;
  double lr = 2e-3;  // small models tolerate a high one
  double min_lr = -1;  // -1: lr / 10, as nanoGPT (min_lr_value())
  int64_t warmup_steps = 100;
  int64_t decay_steps = 0;
  LrSchedule lr_schedule = LrSchedule::kCosine;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.99;  // rather than 0.95: few tokens per step in small runs
  double eps = 1e-8;
  double grad_clip = 1.0;
  int64_t seed = 1337;
  int64_t eval_interval = 250;
  int64_t eval_batches = 16;
  int64_t log_interval = 25;
  std::string device = "auto";
  int64_t sample_tokens = 300;
  std::string sample_prompt = "";
  double sample_temperature = 0.8;
  int64_t sample_top_k = 40;

  // The decay's floor: min_lr, or lr / 10 where it is -1 (the default, so an lr set alone keeps it below).
  double min_lr_value() const { return min_lr == -1 ? lr / 10 : min_lr; }

  void validate() const {
    check_at_least("train.max_steps", max_steps, 1);
    check_non_negative("train.time_budget", time_budget, "0 = no limit");
    check_at_least("train.micro_batch_size", micro_batch_size, 1);
    check_at_least("train.grad_accum_steps", grad_accum_steps, 1);
    check_positive("train.lr", lr);
    if (!(min_lr == -1 || (min_lr >= 0 && min_lr <= lr))) {
      option_range_error("train.min_lr", option_text(min_lr),
                         "must be in [0, train.lr = " + option_text(lr) + "], or -1 for train.lr / 10");
    }
    check_at_least("train.warmup_steps", warmup_steps, 0);
    check_at_least("train.decay_steps", decay_steps, 0);
    if (decay_steps > 0 && decay_steps <= warmup_steps) {  // the decay would be skipped: lr drops to min_lr at once
      option_range_error("train.decay_steps", std::to_string(decay_steps),
                         "must exceed train.warmup_steps = " + std::to_string(warmup_steps) +
                             " (it is the step at which the decay ends), or 0 for train.max_steps");
    }
    check_non_negative("train.weight_decay", weight_decay, "");
    check_in_range("train.beta1", beta1, 0.0, 1.0, false);
    check_in_range("train.beta2", beta2, 0.0, 1.0, false);
    check_positive("train.eps", eps);
    check_non_negative("train.grad_clip", grad_clip, "0 = off");
    check_at_least("train.eval_interval", eval_interval, 0);
    check_at_least("train.eval_batches", eval_batches, 1);
    check_at_least("train.log_interval", log_interval, 1);
    check_at_least("train.sample_tokens", sample_tokens, 0);
    check_positive("train.sample_temperature", sample_temperature);
    check_at_least("train.sample_top_k", sample_top_k, 0);
    const bool cuda_n = device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
                        device.find_first_not_of("0123456789", 5) == std::string::npos;
    if (device != "auto" && device != "cpu" && device != "cuda" && !cuda_n) {
      throw ConfigError("config: train.device = '" + device + "' is not valid: expected auto, cpu, cuda or cuda:N");
    }
  }

  template <class V>
  void visit(V& v) {
    v("max_steps", max_steps, "optimizer steps; the run also stops at time_budget");
    v("time_budget", time_budget, "seconds of training (evaluation included) before stopping; 0 = no limit");
    v("micro_batch_size", micro_batch_size, "sequences per forward/backward pass (the planner chooses it "
      "unless set)");
    v("grad_accum_steps", grad_accum_steps, "micro-batches accumulated per optimizer step");
    v("lr", lr, "peak learning rate");
    v("min_lr", min_lr, "floor of the learning-rate decay; -1 = lr / 10");
    v("warmup_steps", warmup_steps, "steps of linear warmup from 0 to lr");
    v("decay_steps", decay_steps, "the step at which the decay (from the end of the warmup) reaches min_lr, "
      "as nanoGPT's lr_decay_iters; 0 = max_steps");
    v("lr_schedule", lr_schedule, "learning-rate schedule after the warmup: cosine or linear decay to min_lr, or constant");
    v("weight_decay", weight_decay, "AdamW decoupled weight decay (not on biases, norms, embeddings)");
    v("beta1", beta1, "AdamW beta1");
    v("beta2", beta2, "AdamW beta2");
    v("eps", eps, "AdamW epsilon");
    v("grad_clip", grad_clip, "max global gradient norm; 0 = off");
    v("seed", seed, "random seed (init, dropout, batches)");
    v("eval_interval", eval_interval, "steps between validation passes (and one at the end); 0 = none");
    v("eval_batches", eval_batches, "micro-batches per validation pass");
    v("log_interval", log_interval, "steps between progress lines");
    v("device", device, "auto, cpu, cuda or cuda:N");
    v("sample_tokens", sample_tokens, "tokens generated at the end of the run; 0 = none");
    v("sample_prompt", sample_prompt, "prompt of the final sample");
    v("sample_temperature", sample_temperature, "sampling temperature");
    v("sample_top_k", sample_top_k, "top-k of sampling; 0 = off");
  }
};

}  // namespace hwt
