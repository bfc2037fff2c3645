#include "hwtrain/sweep/median_pruner.h"

#include <algorithm>
#include <cmath>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"

namespace hwt::sweep {
namespace {

// Optuna's _is_first_in_interval_step: no earlier report falls in the interval that `step` is in.
bool median_first_in_interval(std::int64_t step, const Trial& trial, std::int64_t warmup, std::int64_t interval) {
  const std::int64_t nearest_lower = (step - warmup) / interval * interval + warmup;
  std::int64_t previous = -1;
  for (const auto& [s, v] : trial.intermediate) {
    if (s != step) previous = std::max(previous, s);
  }
  return previous < nearest_lower;
}

// The median with linear interpolation between the two middle values (numpy.percentile(x, 50)).
double median_of(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const std::size_t n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

std::string median_num(double x) { return format_number("%.6g", x); }

}  // namespace

void MedianPrunerOptions::validate() const {
  auto bad = [](const std::string& key, std::int64_t value, const std::string& valid) {
    throw ConfigError("config: sweep.median." + key + " = " + std::to_string(value) + " is out of range: " + valid);
  };
  if (n_startup_trials < 0) bad("n_startup_trials", n_startup_trials, "must be >= 0");
  if (n_warmup_steps < 0) bad("n_warmup_steps", n_warmup_steps, "must be >= 0");
  if (interval_steps < 1) bad("interval_steps", interval_steps, "must be at least 1");
}

MedianPruner::MedianPruner(MedianPrunerOptions options) : options_(options) { options_.validate(); }

PruneDecision MedianPruner::decide(const Trial& trial, std::int64_t step, const std::vector<Trial>& history) const {
  int n_completed = 0;
  for (const auto& t : history) n_completed += t.number != trial.number && t.state == TrialState::kComplete;
  if (n_completed == 0 || n_completed < options_.n_startup_trials) {
    return {false, std::to_string(n_completed) + " of " + std::to_string(options_.n_startup_trials) +
                       " startup trials completed"};
  }
  if (step < options_.n_warmup_steps) {
    return {false, "step " + std::to_string(step) + " is in the warm-up (" + std::to_string(options_.n_warmup_steps) + " steps)"};
  }
  if (!median_first_in_interval(step, trial, options_.n_warmup_steps, options_.interval_steps)) {
    return {false, "step " + std::to_string(step) + " is not a pruning step"};
  }
  double best = NAN;
  for (const auto& [s, v] : trial.intermediate) {
    if (!std::isnan(v) && (std::isnan(best) || v < best)) best = v;
  }
  if (std::isnan(best)) return {true, "pruned at step " + std::to_string(step) + ": every reported value is NaN"};

  std::vector<double> others;
  for (const auto& t : history) {
    const bool counts = t.state == TrialState::kComplete || (options_.include_pruned_trials && t.state == TrialState::kPruned);
    if (t.number == trial.number || !counts) continue;
    auto it = t.intermediate.find(step);
    if (it != t.intermediate.end() && !std::isnan(it->second)) others.push_back(it->second);
  }
  if (others.empty()) return {false, "no other trial reported at step " + std::to_string(step)};
  const double median = median_of(others);
  const std::string compared = "best value " + median_num(best) + " vs the median " + median_num(median) + " of " +
                               std::to_string(others.size()) + " trials at step " + std::to_string(step);
  if (best > median) return {true, "pruned by the median rule: " + compared};
  return {false, compared};
}

}  // namespace hwt::sweep
