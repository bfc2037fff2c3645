// MetricGoal: whether lower or higher values of a monitored metric are better (early stopping,
// LR on plateau, the best checkpoint, a sweep's objective). TOML names "min" | "max".
#pragma once
#include "hwtrain/core/enum_names.h"

namespace hwt {

enum class MetricGoal { kMin, kMax };
template <>
struct EnumNames<MetricGoal> {
  static constexpr std::array<std::pair<MetricGoal, const char*>, 2> table{{
      {MetricGoal::kMin, "min"},
      {MetricGoal::kMax, "max"}}};
};

// True when `candidate` improves on `best` by more than `min_delta` in the goal's direction.
inline bool improves(MetricGoal goal, double candidate, double best, double min_delta = 0.0) {
  return goal == MetricGoal::kMin ? candidate < best - min_delta : candidate > best + min_delta;
}

}  // namespace hwt
