#include "hwtrain/sweep/parzen_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "hwtrain/sweep/truncated_normal.h"

namespace hwt::sweep {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Index of the kernel whose cumulative weight first exceeds u in [0, 1).
std::size_t parzen_pick_kernel(const std::vector<double>& weights, double u) {
  double acc = 0;
  for (std::size_t k = 0; k + 1 < weights.size(); ++k) {
    acc += weights[k];
    if (u < acc) return k;
  }
  return weights.size() - 1;
}

double parzen_log_sum_exp(const std::vector<double>& xs) {
  double m = *std::max_element(xs.begin(), xs.end());
  if (m == kNegInf) return kNegInf;
  double s = 0;
  for (double x : xs) s += std::exp(x - m);
  return m + std::log(s);
}

}  // namespace

std::vector<double> tpe_observation_weights(std::size_t n) {
  std::vector<double> w(n, 1.0);
  if (n < 25) return w;
  const std::size_t ramp = n - 25;  // np.linspace(1 / n, 1, num=ramp)
  for (std::size_t i = 0; i < ramp; ++i) {
    const double lo = 1.0 / static_cast<double>(n);
    w[i] = ramp == 1 ? lo : lo + (1.0 - lo) * static_cast<double>(i) / static_cast<double>(ramp - 1);
  }
  return w;
}

ParzenEstimator::ParzenEstimator(const ParamSpec& spec, const std::vector<double>& observations,
                                 const ParzenOptions& options)
    : spec_(spec) {
  if (observations.empty()) {
    weights_ = {1.0};  // the prior alone
  } else {
    weights_ = tpe_observation_weights(observations.size());
    weights_.push_back(options.prior_weight);
  }
  const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  for (double& w : weights_) w /= total;
  for (double w : weights_) log_weights_.push_back(std::log(w));
  if (spec.kind == ParamKind::kChoice) {
    build_choice(observations, options);
  } else {
    build_numeric(observations, options);
  }
}

void ParzenEstimator::build_choice(const std::vector<double>& observations, const ParzenOptions& options) {
  const std::size_t n_choices = spec_.choices.size();
  if (observations.empty()) {
    choice_probs_.assign(1, std::vector<double>(n_choices, 1.0 / static_cast<double>(n_choices)));
    return;
  }
  const double n_kernels = static_cast<double>(observations.size() + 1);
  choice_probs_.assign(observations.size() + 1, std::vector<double>(n_choices, options.prior_weight / n_kernels));
  for (std::size_t k = 0; k < observations.size(); ++k) {
    choice_probs_[k][static_cast<std::size_t>(observations[k])] += 1;
  }
  for (auto& row : choice_probs_) {
    const double s = std::accumulate(row.begin(), row.end(), 0.0);
    for (double& p : row) p = s > 0 ? p / s : 1.0 / static_cast<double>(n_choices);
  }
}

void ParzenEstimator::build_numeric(const std::vector<double>& observations, const ParzenOptions& options) {
  log_ = spec_.kind == ParamKind::kLogUniform || (spec_.kind == ParamKind::kInt && spec_.log);
  discrete_ = spec_.kind == ParamKind::kInt;
  const double pad = discrete_ ? 0.5 : 0.0;
  low_ = log_ ? std::log(spec_.low - pad) : spec_.low - pad;
  high_ = log_ ? std::log(spec_.high + pad) : spec_.high + pad;
  for (double x : observations) mus_.push_back(transform(x));

  // Bandwidths: the larger gap to a sorted neighbour, the range ends and the prior's centre being
  // neighbours too (Optuna's _calculate_numerical_distributions, mus_with_prior).
  const std::size_t n = mus_.size();
  const double prior_mu = 0.5 * (low_ + high_);
  std::vector<std::size_t> order(n + 1);  // index n: the prior's centre
  std::iota(order.begin(), order.end(), 0);
  const auto mu_at = [&](std::size_t i) { return i == n ? prior_mu : mus_[i]; };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return mu_at(a) < mu_at(b); });
  std::vector<double> ends{low_};  // the sorted centres with the range ends
  for (std::size_t i : order) ends.push_back(mu_at(i));
  ends.push_back(high_);
  std::vector<double> sorted_sigma(n + 1);
  for (std::size_t j = 0; j <= n; ++j) {
    sorted_sigma[j] = std::max(ends[j + 1] - ends[j], ends[j + 2] - ends[j + 1]);
  }
  if (!options.consider_endpoints && ends.size() >= 4) {
    sorted_sigma[0] = ends[2] - ends[1];
    sorted_sigma[n] = ends[n + 1] - ends[n];
  }
  const double range = high_ - low_;
  const double min_sigma = options.consider_magic_clip ? range / std::min(100.0, static_cast<double>(n) + 2.0) : 1e-12;
  sigmas_.assign(n, 0.0);
  for (std::size_t j = 0; j <= n; ++j) {
    if (order[j] < n) sigmas_[order[j]] = std::clamp(sorted_sigma[j], min_sigma, range);
  }

  mus_.push_back(0.5 * (low_ + high_));  // the prior kernel
  sigmas_.push_back(range);
  for (std::size_t k = 0; k < mus_.size(); ++k) {
    log_norm_.push_back(log_gauss_mass((low_ - mus_[k]) / sigmas_[k], (high_ - mus_[k]) / sigmas_[k]));
    // log w - log sqrt(2 pi) - log sigma - log mass: the constant part of a real kernel's log density.
    log_density_const_.push_back(log_weights_[k] - 0.91893853320467274178 - std::log(sigmas_[k]) - log_norm_[k]);
  }
}

double ParzenEstimator::transform(double x) const { return log_ ? std::log(x) : x; }

double ParzenEstimator::sample(SweepRng& rng) const {
  const std::size_t k = parzen_pick_kernel(weights_, u01(rng));
  if (spec_.kind == ParamKind::kChoice) {
    return static_cast<double>(parzen_pick_kernel(choice_probs_[k], u01(rng)));
  }
  double x = truncnorm_sample(rng, mus_[k], sigmas_[k], low_, high_);
  if (log_) x = std::exp(x);
  if (discrete_) return std::clamp(spec_.low + std::nearbyint(x - spec_.low), spec_.low, spec_.high);
  return std::clamp(x, spec_.low, spec_.high);
}

double ParzenEstimator::log_pdf(double x) const {
  std::vector<double> terms(weights_.size());
  if (spec_.kind == ParamKind::kChoice) {
    for (std::size_t k = 0; k < terms.size(); ++k) {
      terms[k] = log_weights_[k] + std::log(choice_probs_[k][static_cast<std::size_t>(x)]);
    }
  } else if (discrete_) {
    const double left = transform(x - 0.5), right = transform(x + 0.5);
    for (std::size_t k = 0; k < terms.size(); ++k) {
      const double mass = log_gauss_mass((left - mus_[k]) / sigmas_[k], (right - mus_[k]) / sigmas_[k]);
      terms[k] = log_weights_[k] + mass - log_norm_[k];
    }
  } else {
    const double xt = transform(x);
    for (std::size_t k = 0; k < terms.size(); ++k) {
      const double z = (xt - mus_[k]) / sigmas_[k];
      terms[k] = log_density_const_[k] - 0.5 * z * z;
    }
  }
  return parzen_log_sum_exp(terms);
}

double ParzenEstimator::to_internal(const ParamSpec& spec, const ParamValue& value) {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&value)) return static_cast<double>(*i);
  const auto& s = std::get<std::string>(value);
  return static_cast<double>(std::find(spec.choices.begin(), spec.choices.end(), s) - spec.choices.begin());
}

ParamValue ParzenEstimator::to_external(const ParamSpec& spec, double x) {
  switch (spec.kind) {
    case ParamKind::kUniform:
    case ParamKind::kLogUniform: return x;
    case ParamKind::kInt: return static_cast<std::int64_t>(std::llround(x));
    case ParamKind::kChoice: return spec.choices[static_cast<std::size_t>(x)];
  }
  return x;
}

}  // namespace hwt::sweep
