#include "hwtrain/train/metric_watch.h"

#include <cmath>

#include "hwtrain/core/error.h"

namespace hwt {

MetricWatch::MetricWatch(std::string monitor, MetricGoal mode, double min_delta, const std::string& key)
    : monitor_(std::move(monitor)), mode_(mode), min_delta_(min_delta) {
  check_metric_name(monitor_, key);
  on_eval_ = is_eval_metric(monitor_);
}

std::optional<double> MetricWatch::value_in(const StepMetrics& m) const {
  return on_eval_ ? std::nullopt : metric_value(monitor_, m);
}

std::optional<double> MetricWatch::value_in(const EvalMetrics& m) const {
  return on_eval_ ? metric_value(monitor_, m) : std::nullopt;
}

bool MetricWatch::improves(double value) const {
  if (!std::isfinite(value)) return false;
  if (!best_) return true;
  return hwt::improves(mode_, value, *best_, min_delta_);
}

bool MetricWatch::update(double value, int64_t step) {
  if (improves(value)) {
    best_ = value;
    best_step_ = step;
    wait_ = 0;
    return true;
  }
  ++wait_;
  return false;
}

void MetricWatch::reset() {
  best_.reset();
  best_step_ = -1;
  wait_ = 0;
}

}  // namespace hwt
