#include "hwtrain/train/early_stopping.h"

#include <fmt/format.h>

#include "hwtrain/obs/log.h"

namespace hwt {

EarlyStopping::EarlyStopping(const EarlyStoppingConfig& options)
    : options_(validated(options)),
      watch_(options.monitor, options.mode, options.min_delta,
             "early_stopping.monitor") {}

void EarlyStopping::on_train_begin(TrainerControl&) {
  watch_.reset();
  best_weights_.clear();
  stopped_ = restored_ = false;
}

CallbackState EarlyStopping::state() const {
  CallbackState s;
  watch_.save_state(s);
  return s;
}

void EarlyStopping::load_state(const CallbackState& s) { watch_.load_state(s); }

void EarlyStopping::on_step_end(TrainerControl& t, const StepMetrics& m) {
  if (auto v = watch_.value_in(m)) check(t, *v, m.step);
}

void EarlyStopping::on_evaluation_end(TrainerControl& t, const EvalMetrics& m) {
  if (auto v = watch_.value_in(m)) check(t, *v, m.step);
}

void EarlyStopping::check(TrainerControl& t, double value, int64_t step) {
  if (stopped_) return;
  if (watch_.update(value, step)) {
    if (options_.restore_best_weights) best_weights_ = t.snapshot_weights();
    return;
  }
  if (watch_.checks_without_improvement() < options_.patience) return;
  stopped_ = true;
  const std::string reason = fmt::format(
      "early stopping: {} did not improve by more than {} for {} {} (best {:.6g} at step {})", watch_.monitor(),
      options_.min_delta, options_.patience, watch_.watches_evaluations() ? "evaluations" : "steps",
      watch_.best().value_or(kUnknown), watch_.best_step());
  if (options_.restore_best_weights && !best_weights_.empty()) {
    t.restore_weights(best_weights_);
    best_weights_.clear();
    restored_ = true;
    log_info("early stopping: restored the weights of step {}", watch_.best_step());
  } else if (options_.restore_best_weights && watch_.best_step() >= 0) {
    log_warn("early stopping: the best weights (step {}) are from before the resume and were not kept; the run "
             "ends with its last weights (its checkpoints of that step hold them)",
             watch_.best_step());
  }
  t.request_stop(reason);
}

}  // namespace hwt
