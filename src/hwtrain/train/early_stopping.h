// EarlyStopping: stops training when a monitored metric has not improved for `patience` checks,
// optionally restoring the weights of the best check first (so the final checkpoint and sample
// use them). The stop goes through TrainerControl::request_stop with a reason, so the run still
// evaluates, checkpoints, flushes its sinks and writes its report.
#pragma once
#include "hwtrain/train/callback.h"
#include "hwtrain/train/callback_config.h"
#include "hwtrain/train/metric_watch.h"

namespace hwt {

class EarlyStopping : public Callback {
 public:
  // Validates the options; ConfigError for an unknown metric or a bad range.
  explicit EarlyStopping(const EarlyStoppingConfig& options);
  std::string name() const override { return "early_stopping"; }
  void on_train_begin(TrainerControl& t) override;
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;
  void on_evaluation_end(TrainerControl& t, const EvalMetrics& m) override;
  // The watch's best and patience so far (the best weights are not kept across a resume).
  CallbackState state() const override;
  void load_state(const CallbackState& s) override;

  const MetricWatch& watch() const { return watch_; }
  bool stopped() const { return stopped_; }
  bool restored() const { return restored_; }

 private:
  void check(TrainerControl& t, double value, int64_t step);

  EarlyStoppingConfig options_;
  MetricWatch watch_;
  NamedTensors best_weights_;
  bool stopped_ = false;
  bool restored_ = false;
};

}  // namespace hwt
