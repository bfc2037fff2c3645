#include "hwtrain/train/metric_watch.h"

#include <cmath>

#include "hwtrain/core/error.h"

namespace hwt {

MetricWatch::MetricWatch(std::string monitor, MetricGoal mode, double min_delta, const std::string& key)
    : monitor_(std::move(monitor)), mode_(mode), min_delta_(min_delta) {
  check_metric_name(monitor_, key);
  on_eval_ = is_eval_metric(monitor_);
}

// A loss that is not finite is a diverged step or evaluation, not an unknown value (which NaN means
// for the other fields): it is checked, and never improves, so patience runs out on it.
std::optional<double> MetricWatch::value_in(const StepMetrics& m) const {
  if (on_eval_) return std::nullopt;
  if (monitor_ == "loss" && !std::isfinite(m.loss)) return m.loss;
  return metric_value(monitor_, m);
}

std::optional<double> MetricWatch::value_in(const EvalMetrics& m) const {
  if (!on_eval_) return std::nullopt;
  if (monitor_ == "val_loss" && !std::isfinite(m.val_loss)) return m.val_loss;
  if (monitor_ == "val_perplexity" && !std::isfinite(m.val_perplexity)) return m.val_perplexity;
  return metric_value(monitor_, m);
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

namespace {

// Whole numbers a resumed watch may take back: a step (-1: none yet) or a count.
std::optional<int64_t> whole(const std::map<std::string, double>& s, const std::string& key, double lo) {
  const auto it = s.find(key);
  if (it == s.end() || !(it->second >= lo && it->second <= 1e15) || it->second != std::floor(it->second)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(it->second);
}

}  // namespace

void MetricWatch::save_state(std::map<std::string, double>& s) const {
  const std::string prefix = monitor_ + "." + enum_name(mode_) + ".";
  if (best_) s[prefix + "best"] = *best_;
  s[prefix + "best_step"] = static_cast<double>(best_step_);
  s[prefix + "wait"] = static_cast<double>(wait_);
}

void MetricWatch::load_state(const std::map<std::string, double>& s) {
  const std::string prefix = monitor_ + "." + enum_name(mode_) + ".";
  const std::optional<int64_t> step = whole(s, prefix + "best_step", -1), wait = whole(s, prefix + "wait", 0);
  if (!step || !wait) return;  // another metric or goal, or nothing saved: start afresh
  reset();
  if (const auto it = s.find(prefix + "best"); it != s.end() && std::isfinite(it->second)) {
    best_ = it->second;
    best_step_ = *step;
  }
  wait_ = *wait;
}

void MetricWatch::reset() {
  best_.reset();
  best_step_ = -1;
  wait_ = 0;
}

}  // namespace hwt
