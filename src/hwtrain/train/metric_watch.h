// MetricWatch: the shared rule of the callbacks that watch one metric (early stopping, LR on
// plateau, best checkpoint): read the monitored value from step or evaluation records, decide
// whether it improved on the best by more than min_delta, and count checks without improvement.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "hwtrain/core/metric_goal.h"
#include "hwtrain/obs/metrics.h"

namespace hwt {

class MetricWatch {
 public:
  // Throws ConfigError (naming `key`) for an unknown metric name.
  MetricWatch(std::string monitor, MetricGoal mode, double min_delta, const std::string& key);

  const std::string& monitor() const { return monitor_; }
  bool watches_evaluations() const { return on_eval_; }
  // The monitored value in the record, when the record carries it (nullopt otherwise).
  std::optional<double> value_in(const StepMetrics& m) const;
  std::optional<double> value_in(const EvalMetrics& m) const;

  // Records one check; returns true when `value` improved on the best (which it then becomes).
  // A NaN never improves.
  bool update(double value, int64_t step);
  bool improves(double value) const;

  std::optional<double> best() const { return best_; }
  int64_t best_step() const { return best_step_; }
  int64_t checks_without_improvement() const { return wait_; }
  void reset_wait() { wait_ = 0; }
  void reset();
  // The best, its step and the checks since, into `s` under keys that name the metric and goal
  // ("val_loss.min.best"); load_state takes them back when they are this watch's (a run watching
  // another metric or goal starts afresh).
  // (std::map<std::string, double> is train/callback.h's CallbackState.)
  void save_state(std::map<std::string, double>& s) const;
  void load_state(const std::map<std::string, double>& s);

 private:
  std::string monitor_;
  MetricGoal mode_;
  double min_delta_;
  bool on_eval_;
  std::optional<double> best_;
  int64_t best_step_ = -1;
  int64_t wait_ = 0;
};

}  // namespace hwt
