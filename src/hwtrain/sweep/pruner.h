// The pruner interface of a sweep: after a trial reports an intermediate value (lower is better) at
// a step, decide from the study's history whether to stop it, and say why for the trial's record.
// Pruners keep no state between calls: everything they use is in the trials, so a resumed study
// prunes as an uninterrupted one would. Implementations: MedianPruner (median_pruner.h),
// AshaPruner (asha_pruner.h). This file does not stop processes; the sweep command does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/sweep/trial.h"

namespace hwt::sweep {

struct PruneDecision {
  bool prune = false;
  std::string reason;  // one line for Trial::reason when pruned; why it continues otherwise
};

class Pruner {
 public:
  virtual ~Pruner();
  // `trial` is the running trial; trial.intermediate holds every value it reported so far, the one
  // at `step` included. `history` is every trial of the study (it may contain `trial` itself, which
  // is recognised by its number and not compared with itself).
  virtual PruneDecision decide(const Trial& trial, std::int64_t step, const std::vector<Trial>& history) const = 0;
  virtual std::string name() const = 0;

  bool should_prune(const Trial& trial, std::int64_t step, const std::vector<Trial>& history) const {
    return decide(trial, step, history).prune;
  }
};

}  // namespace hwt::sweep
