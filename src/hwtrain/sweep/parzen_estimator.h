// The univariate Parzen estimator of the TPE sampler, as Optuna's samplers/_tpe/parzen_estimator.py
// builds it for one parameter: a weighted mixture of one kernel per observation plus a prior kernel.
// Reals: truncated normals on [low, high] (on [log low, log high] for log ranges) centred on the
// observations, bandwidth = the larger gap to a neighbour, clipped to [range / min(100, n + 2), range]
// ("magic clip"), the prior centred on the middle with the whole range as bandwidth. Ints: the same
// on [low - 0.5, high + 0.5], a value's probability being the kernel mass of its rounding interval.
// Choices: per kernel, prior_weight / (n + 1) on every choice plus 1 on the observed one.
// It does not split trials or pick candidates (tpe_sampler.h).
#pragma once
#include <vector>

#include "hwtrain/sweep/sampler.h"

namespace hwt::sweep {

struct ParzenOptions {
  double prior_weight = 1.0;        // weight of the prior kernel against 1 per observation (Optuna's default)
  bool consider_magic_clip = true;  // lower-clip bandwidths to range / min(100, n + 2) (Optuna's default)
  bool consider_endpoints = false;  // let the range ends count as neighbours of the outermost observations
};

// Optuna's default_weights: n ones, except that beyond 25 observations the oldest n - 25 ramp
// linearly from 1/n up to 1, so that old trials count less. `n` observations, oldest first.
std::vector<double> tpe_observation_weights(std::size_t n);

class ParzenEstimator {
 public:
  // `observations` in the internal representation (see to_internal), oldest first; each must be a
  // value of `spec`.
  ParzenEstimator(const ParamSpec& spec, const std::vector<double>& observations, const ParzenOptions& options);

  // A draw in the internal representation.
  double sample(SweepRng& rng) const;
  // log density (reals, up to the same log-space Jacobian for every estimator) or log probability
  // (ints, choices) at `x`, in the internal representation.
  double log_pdf(double x) const;

  // Internal representation: a real or int as the number, a choice as the index of its literal.
  static double to_internal(const ParamSpec& spec, const ParamValue& value);
  static ParamValue to_external(const ParamSpec& spec, double x);

 private:
  void build_numeric(const std::vector<double>& observations, const ParzenOptions& options);
  void build_choice(const std::vector<double>& observations, const ParzenOptions& options);
  double transform(double x) const;  // internal value -> kernel space (log for log ranges)

  ParamSpec spec_;
  bool log_ = false;       // kernels live in log space
  bool discrete_ = false;  // int: probabilities are masses of rounding intervals
  std::vector<double> weights_, log_weights_;  // mixture weights per kernel, prior last
  double low_ = 0, high_ = 0;                  // kernel-space bounds (adapted for ints)
  std::vector<double> mus_, sigmas_;           // numeric kernels, kernel space
  std::vector<double> log_norm_;               // log mass of each kernel on [low_, high_]
  std::vector<double> log_density_const_;      // reals: log weight - log(sqrt(2 pi) sigma) - log mass
  std::vector<std::vector<double>> choice_probs_;  // choice kernels: probability of each literal
};

}  // namespace hwt::sweep
