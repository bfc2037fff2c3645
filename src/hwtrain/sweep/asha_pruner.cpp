#include "hwtrain/sweep/asha_pruner.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"

namespace hwt::sweep {
namespace {

constexpr std::int64_t kAshaNever = std::numeric_limits<std::int64_t>::max();

// The value of `t`'s first report at or past `rung_step`, or nullptr when it has none.
const double* asha_rung_value(const Trial& t, std::int64_t rung_step) {
  auto it = t.intermediate.lower_bound(rung_step);
  return it == t.intermediate.end() ? nullptr : &it->second;
}

std::string asha_num(double x) { return format_number("%.6g", x); }

}  // namespace

void AshaPrunerOptions::validate() const {
  auto bad = [](const std::string& key, std::int64_t value, const std::string& valid) {
    throw ConfigError("config: sweep.asha." + key + " = " + std::to_string(value) + " is out of range: " + valid);
  };
  if (min_resource < 1) bad("min_resource", min_resource, "must be at least 1 (the step of the first rung)");
  if (reduction_factor < 2) bad("reduction_factor", reduction_factor, "must be at least 2 (each rung keeps 1/reduction_factor)");
  if (min_early_stopping_rate < 0) bad("min_early_stopping_rate", min_early_stopping_rate, "must be >= 0");
}

AshaPruner::AshaPruner(AshaPrunerOptions options) : options_(options) { options_.validate(); }

std::int64_t AshaPruner::rung_step(int k) const {
  std::int64_t step = options_.min_resource;
  for (std::int64_t i = 0; i < options_.min_early_stopping_rate + k; ++i) {
    if (step > kAshaNever / options_.reduction_factor) return kAshaNever;
    step *= options_.reduction_factor;
  }
  return step;
}

std::vector<std::int64_t> AshaPruner::rung_steps(std::int64_t max_step) const {
  std::vector<std::int64_t> steps;
  for (int k = 0;; ++k) {
    const std::int64_t s = rung_step(k);
    if (s > max_step || s == kAshaNever) break;
    steps.push_back(s);
  }
  return steps;
}

PruneDecision AshaPruner::decide(const Trial& trial, std::int64_t step, const std::vector<Trial>& history) const {
  auto own = trial.intermediate.find(step);
  if (own == trial.intermediate.end()) return {false, "no value reported at step " + std::to_string(step)};
  const double value = own->second;
  // Rungs this report is the trial's first at or past: previous report < rung step <= step.
  const std::int64_t previous = own == trial.intermediate.begin() ? std::numeric_limits<std::int64_t>::min()
                                                                   : std::prev(own)->first;
  std::string passed;
  for (int k = 0;; ++k) {
    const std::int64_t rs = rung_step(k);
    if (rs > step || rs == kAshaNever) break;
    if (rs <= previous) continue;
    const std::string rung = "rung " + std::to_string(k) + " (step " + std::to_string(rs) + ")";
    if (std::isnan(value)) return {true, "pruned at " + rung + ": the value is NaN"};
    std::vector<double> competing{value};
    for (const auto& t : history) {
      if (t.number == trial.number) continue;
      const double* v = asha_rung_value(t, rs);
      if (v && !std::isnan(*v)) competing.push_back(*v);
    }
    const std::int64_t n = static_cast<std::int64_t>(competing.size());
    const std::int64_t keep = std::max<std::int64_t>(1, n / options_.reduction_factor);
    std::nth_element(competing.begin(), competing.begin() + (keep - 1), competing.end());
    const double threshold = competing[static_cast<std::size_t>(keep - 1)];
    const std::string among = " among the best " + std::to_string(keep) + " of " + std::to_string(n) + " at " + rung +
                              " (cut-off " + asha_num(threshold) + ")";
    if (value > threshold) return {true, "pruned by successive halving: value " + asha_num(value) + " is not" + among};
    passed = "promoted: value " + asha_num(value) + " is" + among;
  }
  if (passed.empty()) return {false, "step " + std::to_string(step) + " is not a rung step"};
  return {false, passed};
}

}  // namespace hwt::sweep
