#include "hwtrain/sweep/tpe_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/random_sampler.h"

namespace hwt::sweep {
namespace {

bool tpe_is_complete(const Trial& t) {
  return t.state == TrialState::kComplete && t.value && !std::isnan(*t.value);
}

// Optuna's _get_pruned_trial_score: (-last step, last value), NaN as +inf; no reports sorts last.
std::pair<double, double> tpe_pruned_score(const Trial& t) {
  if (t.intermediate.empty()) return {1.0, 0.0};
  const auto& [step, value] = *t.intermediate.rbegin();
  return {-static_cast<double>(step), std::isnan(value) ? std::numeric_limits<double>::infinity() : value};
}

bool tpe_by_number(const Trial* a, const Trial* b) { return a->number < b->number; }

// The observations of `spec` in `trials` (internal representation), skipping values not in the space.
std::vector<double> tpe_observations(const ParamSpec& spec, const std::vector<const Trial*>& trials) {
  std::vector<double> xs;
  for (const Trial* t : trials) {
    auto it = t->params.find(spec.key);
    if (it != t->params.end() && is_value_of(spec, it->second)) xs.push_back(ParzenEstimator::to_internal(spec, it->second));
  }
  return xs;
}

}  // namespace

void TpeOptions::validate() const {
  auto bad = [](const std::string& key, const std::string& value, const std::string& valid) {
    throw ConfigError("config: sweep.tpe." + key + " = " + value + " is out of range: " + valid);
  };
  if (n_startup_trials < 0) bad("n_startup_trials", std::to_string(n_startup_trials), "must be >= 0");
  if (n_ei_candidates < 1) bad("n_ei_candidates", std::to_string(n_ei_candidates), "must be at least 1");
  if (!(gamma_fraction > 0 && gamma_fraction <= 1)) bad("gamma_fraction", std::to_string(gamma_fraction), "must be in (0, 1]");
  if (gamma_max < 1) bad("gamma_max", std::to_string(gamma_max), "must be at least 1");
  if (!(parzen.prior_weight > 0) || !std::isfinite(parzen.prior_weight)) {
    bad("prior_weight", std::to_string(parzen.prior_weight), "must be a finite number > 0");
  }
}

TpeSampler::TpeSampler(TpeOptions options) : options_(std::move(options)) { options_.validate(); }

int TpeSampler::n_below(std::size_t n_finished) const {
  const double g = std::ceil(options_.gamma_fraction * static_cast<double>(n_finished));
  return static_cast<int>(std::min(g, static_cast<double>(options_.gamma_max)));
}

std::pair<std::vector<const Trial*>, std::vector<const Trial*>> TpeSampler::split_trials(
    const std::vector<Trial>& history, int n_below) {
  std::vector<const Trial*> complete, pruned;
  for (const auto& t : history) {
    if (tpe_is_complete(t)) complete.push_back(&t);
    if (t.state == TrialState::kPruned) pruned.push_back(&t);
  }
  std::stable_sort(complete.begin(), complete.end(),
                   [](const Trial* a, const Trial* b) { return std::tie(*a->value, a->number) < std::tie(*b->value, b->number); });
  std::stable_sort(pruned.begin(), pruned.end(), [](const Trial* a, const Trial* b) {
    return std::make_tuple(tpe_pruned_score(*a), a->number) < std::make_tuple(tpe_pruned_score(*b), b->number);
  });
  std::vector<const Trial*> below, above;
  std::size_t left = static_cast<std::size_t>(std::max(0, n_below));
  for (const auto* list : {&complete, &pruned}) {
    for (const Trial* t : *list) {
      if (left > 0) {
        below.push_back(t);
        --left;
      } else {
        above.push_back(t);
      }
    }
  }
  std::sort(below.begin(), below.end(), tpe_by_number);
  std::sort(above.begin(), above.end(), tpe_by_number);
  return {below, above};
}

ParamValue TpeSampler::sample_param(const ParamSpec& spec, const std::vector<const Trial*>& below,
                                    const std::vector<const Trial*>& above, SweepRng& rng) const {
  const ParzenEstimator l(spec, tpe_observations(spec, below), options_.parzen);
  const ParzenEstimator g(spec, tpe_observations(spec, above), options_.parzen);
  double best_x = 0, best_score = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < options_.n_ei_candidates; ++i) {
    const double x = l.sample(rng);
    const double score = l.log_pdf(x) - g.log_pdf(x);
    if (i == 0 || score > best_score) {  // first maximum wins, as np.argmax
      best_x = x;
      best_score = score;
    }
  }
  return ParzenEstimator::to_external(spec, best_x);
}

Params TpeSampler::sample(const SearchSpace& space, const std::vector<Trial>& history, std::uint64_t seed) {
  std::size_t n_finished = 0;
  for (const auto& t : history) n_finished += tpe_is_complete(t) || t.state == TrialState::kPruned;
  if (n_finished < static_cast<std::size_t>(options_.n_startup_trials)) {
    return RandomSampler().sample(space, history, seed);
  }
  const auto [below, above] = split_trials(history, n_below(n_finished));
  SweepRng rng(seed);
  Params params;
  for (const auto& spec : space.params) params[spec.key] = sample_param(spec, below, above, rng);
  return params;
}

}  // namespace hwt::sweep
