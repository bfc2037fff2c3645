// MedianPruner, with the semantics of Optuna's MedianPruner (a PercentilePruner at 50): once
// n_startup_trials trials have completed and the trial is past its warm-up, at each pruning step
// (every interval_steps after the warm-up) prune when the best value the trial reported so far is
// worse than the median of the values other trials reported at that same step. Trials that did not
// report at that step are left out; no such trial means no pruning. A trial whose every value is NaN
// is pruned. The median interpolates between the two middle values (numpy's percentile).
// Not offered: other percentiles, n_min_trials.
#pragma once
#include "hwtrain/sweep/pruner.h"

namespace hwt::sweep {

struct MedianPrunerOptions {
  // Completed trials needed before any pruning: the median of too few runs is noise (Optuna's default).
  int n_startup_trials = 5;
  // Steps before which a trial is never pruned: early values say little about the end (Optuna: 0).
  std::int64_t n_warmup_steps = 0;
  // Judge only at the first report of every interval_steps-long interval after the warm-up (Optuna: 1).
  std::int64_t interval_steps = 1;
  // Whether pruned trials' values join the completed trials' in the median. Optuna uses completed
  // trials only (false); true compares against more, but worse-biased, curves, and prunes less.
  bool include_pruned_trials = false;

  // Throws ConfigError naming the sweep.median.* option that is out of range.
  void validate() const;
};

class MedianPruner : public Pruner {
 public:
  explicit MedianPruner(MedianPrunerOptions options = {});
  PruneDecision decide(const Trial& trial, std::int64_t step, const std::vector<Trial>& history) const override;
  std::string name() const override { return "median"; }

 private:
  MedianPrunerOptions options_;
};

}  // namespace hwt::sweep
