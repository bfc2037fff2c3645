// TpeSampler: the Tree-structured Parzen Estimator (Bergstra, Bardenet, Bengio, Kegl 2011) as
// Optuna's default, univariate TPESampler implements it. After n_startup_trials finished trials
// drawn at random, the finished trials are split into the best gamma(n) ("below") and the rest
// ("above"); per parameter, a Parzen estimator l(x) is fitted to the below values and g(x) to the
// above values (parzen_estimator.h), n_ei_candidates are drawn from l and the one maximizing
// log l(x) - log g(x) is taken.
// Finished = complete with a value, or pruned. As in Optuna, pruned trials rank after every complete
// trial, among themselves by the last step they reached (later is better), then by the value they
// reported there. Running, failed and interrupted trials are not used.
// Not offered: multivariate or grouped TPE, constant liar, constraints, multi-objective.
#pragma once
#include <utility>

#include "hwtrain/sweep/parzen_estimator.h"
#include "hwtrain/sweep/sampler.h"

namespace hwt::sweep {

struct TpeOptions {
  // Finished trials sampled at random before TPE takes over: the estimators need a few points
  // to say anything (Optuna's default).
  int n_startup_trials = 10;
  // Candidates drawn from l(x) per parameter; more exploits harder (Optuna's default).
  int n_ei_candidates = 24;
  // gamma(n) = min(ceil(gamma_fraction * n), gamma_max) trials form l(x): the best 10%, at most 25,
  // so l(x) stays a small set of good points however long the study (Optuna's default_gamma).
  double gamma_fraction = 0.1;
  int gamma_max = 25;
  // The Parzen estimators' prior weight, magic clip and endpoints (see parzen_estimator.h).
  ParzenOptions parzen;

  // Throws ConfigError naming the sweep.tpe.* option that is out of range.
  void validate() const;
};

class TpeSampler : public Sampler {
 public:
  explicit TpeSampler(TpeOptions options = {});
  Params sample(const SearchSpace& space, const std::vector<Trial>& history, std::uint64_t seed) override;
  std::string name() const override { return "tpe"; }

  // gamma(n) for n finished trials.
  int n_below(std::size_t n_finished) const;
  // The finished trials of `history` split into the best `n_below` and the rest, each list in trial
  // order (the order the observation weights assume).
  static std::pair<std::vector<const Trial*>, std::vector<const Trial*>> split_trials(
      const std::vector<Trial>& history, int n_below);

 private:
  ParamValue sample_param(const ParamSpec& spec, const std::vector<const Trial*>& below,
                          const std::vector<const Trial*>& above, SweepRng& rng) const;

  TpeOptions options_;
};

}  // namespace hwt::sweep
