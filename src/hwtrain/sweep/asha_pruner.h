// AshaPruner: asynchronous successive halving (Li et al. 2020, "A System for Massively Parallel
// Hyperparameter Tuning"), as Optuna's SuccessiveHalvingPruner implements it. Rung k sits at step
// min_resource * reduction_factor^(min_early_stopping_rate + k). When a trial first reports at or
// past a rung's step, its value there is compared with the values every other trial had at that
// rung: it goes on iff it is among the best max(1, floor(n / reduction_factor)) of the n values
// (its own included; ties go on), and is pruned otherwise. Between rungs it is never pruned.
// A trial's value at a rung is the value of its first report at or past the rung's step, so reports
// need not fall exactly on rung steps; one report that passes several rungs is judged at each.
// Every other trial of the study that reached the rung counts, whatever its state (Optuna likewise
// keeps the rung values of pruned and failed trials). A NaN value is pruned; NaN values never count.
// Not offered: Optuna's min_resource = "auto" and bootstrap_count; Hyperband brackets.
#pragma once
#include "hwtrain/sweep/pruner.h"

namespace hwt::sweep {

struct AshaPrunerOptions {
  // r: the step of the lowest rung (with min_early_stopping_rate 0). No default fits every run; 1
  // (Optuna's smallest) prunes on the first report. Set it to the step at which curves separate.
  std::int64_t min_resource = 1;
  // eta: each rung keeps the best 1/eta and is eta times further than the previous (the paper's 3).
  std::int64_t reduction_factor = 3;
  // s: shifts every rung up by eta^s, delaying the first judgement (the paper's and Optuna's 0).
  std::int64_t min_early_stopping_rate = 0;

  // Throws ConfigError naming the sweep.asha.* option that is out of range.
  void validate() const;
};

class AshaPruner : public Pruner {
 public:
  explicit AshaPruner(AshaPrunerOptions options = {});
  PruneDecision decide(const Trial& trial, std::int64_t step, const std::vector<Trial>& history) const override;
  std::string name() const override { return "asha"; }

  // The step of rung k (k = 0, 1, ...); INT64_MAX when it would overflow.
  std::int64_t rung_step(int k) const;
  // The rung steps up to and including max_step, ascending.
  std::vector<std::int64_t> rung_steps(std::int64_t max_step) const;

 private:
  AshaPrunerOptions options_;
};

}  // namespace hwt::sweep
