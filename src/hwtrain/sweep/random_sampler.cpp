#include "hwtrain/sweep/random_sampler.h"

#include <algorithm>
#include <cmath>

namespace hwt::sweep {

ParamValue RandomSampler::sample_param(const ParamSpec& spec, SweepRng& rng) {
  switch (spec.kind) {
    case ParamKind::kUniform:
      return std::min(spec.high, spec.low + u01(rng) * (spec.high - spec.low));
    case ParamKind::kLogUniform: {
      const double lo = std::log(spec.low), hi = std::log(spec.high);
      return std::clamp(std::exp(lo + u01(rng) * (hi - lo)), spec.low, spec.high);
    }
    case ParamKind::kInt: {
      const auto lo = static_cast<std::int64_t>(spec.low), hi = static_cast<std::int64_t>(spec.high);
      if (!spec.log) return uniform_int(rng, lo, hi);
      // As Optuna: log-uniform on [low - 0.5, high + 0.5], rounded, so each integer gets the
      // log-width of its own rounding interval.
      const double a = std::log(spec.low - 0.5), b = std::log(spec.high + 0.5);
      const double x = std::exp(a + u01(rng) * (b - a));
      return std::clamp(static_cast<std::int64_t>(std::llround(x)), lo, hi);
    }
    case ParamKind::kChoice: {
      const auto n = static_cast<std::int64_t>(spec.choices.size());
      return spec.choices[static_cast<std::size_t>(uniform_int(rng, 0, n - 1))];
    }
  }
  return 0.0;
}

Params RandomSampler::sample(const SearchSpace& space, const std::vector<Trial>& /*history*/, std::uint64_t seed) {
  SweepRng rng(seed);
  Params params;
  for (const auto& spec : space.params) params[spec.key] = sample_param(spec, rng);
  return params;
}

}  // namespace hwt::sweep
