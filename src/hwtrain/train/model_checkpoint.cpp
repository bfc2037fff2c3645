#include "hwtrain/train/model_checkpoint.h"

#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"

namespace hwt {

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options) : options_(std::move(options)) {
  if (!options_.monitor.empty()) check_metric_name(options_.monitor, "checkpoint monitor");
  if (options_.mode != "min" && options_.mode != "max") {
    throw ConfigError("ModelCheckpoint mode = '" + options_.mode + "' is not valid: expected min or max");
  }
}

void ModelCheckpoint::on_train_begin(TrainerControl& t) { last_save_time_ = t.elapsed_seconds(); }

void ModelCheckpoint::save(TrainerControl& t) {
  if (last_saved_step_ == t.step()) return;
  auto path = t.save_checkpoint();
  last_saved_step_ = t.step();
  last_save_time_ = t.elapsed_seconds();
  if (!path.empty()) log_info("checkpoint: {}", path.string());
}

void ModelCheckpoint::on_step_end(TrainerControl& t, const StepMetrics& m) {
  bool due = options_.every_steps > 0 && t.step() % options_.every_steps == 0;
  due = due || (options_.every_minutes > 0 && t.elapsed_seconds() - last_save_time_ >= 60.0 * options_.every_minutes);
  if (!options_.monitor.empty() && !is_eval_metric(options_.monitor)) {
    if (auto v = metric_value(options_.monitor, m)) {
      const bool better = !best_ || (options_.mode == "min" ? *v < *best_ : *v > *best_);
      if (better) best_ = v;
    }
  }
  if (due) save(t);
}

void ModelCheckpoint::on_evaluation_end(TrainerControl& t, const EvalMetrics& m) {
  if (options_.monitor.empty() || !is_eval_metric(options_.monitor)) return;
  auto v = metric_value(options_.monitor, m);
  if (!v) return;
  const bool better = !best_ || (options_.mode == "min" ? *v < *best_ : *v > *best_);
  if (better) {
    best_ = v;
    save(t);
  }
}

void ModelCheckpoint::on_train_end(TrainerControl& t) {
  if (options_.save_final) save(t);
}

void TimeBudgetStopper::on_step_end(TrainerControl& t, const StepMetrics&) {
  if (seconds_ > 0 && t.elapsed_seconds() >= seconds_) {
    t.request_stop("time budget of " + std::to_string(static_cast<int64_t>(seconds_)) + " s reached");
  }
}

}  // namespace hwt
