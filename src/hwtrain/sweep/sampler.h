// The sampler interface of a sweep, and the portable random numbers every sampler draws from.
// A sampler proposes the parameters of the next trial from the space and the study's history; it
// keeps no state between calls, so a resumed study samples exactly as an uninterrupted one would.
// Implementations: GridSampler (grid_sampler.h), RandomSampler (random_sampler.h),
// TpeSampler (tpe_sampler.h). This file does not run trials or store them.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "hwtrain/sweep/search_space.h"
#include "hwtrain/sweep/trial.h"

namespace hwt::sweep {

class Sampler {
 public:
  virtual ~Sampler();
  // The parameters of the next trial: one value per key of `space` (validated by the caller).
  // `history` is every trial of the study so far, in any state; `seed` comes from
  // trial_seed(study seed, trial number), so the same call always gives the same answer.
  virtual Params sample(const SearchSpace& space, const std::vector<Trial>& history, std::uint64_t seed) = 0;
  virtual std::string name() const = 0;
};

// The seed of trial `trial_number` in a study seeded with `study_seed` (splitmix64 of both), so that
// neighbouring trials get unrelated streams.
std::uint64_t trial_seed(std::uint64_t study_seed, std::int64_t trial_number);

// The draws below use only the raw 64-bit output of the engine, never a std:: distribution, whose
// results differ between standard libraries: a study gives the same trials wherever it runs.
using SweepRng = std::mt19937_64;

// Uniform in [0, 1), 53 random bits.
double u01(SweepRng& rng);
// Uniform integer in [lo, hi] (inclusive), by rejection so that every value is equally likely.
std::int64_t uniform_int(SweepRng& rng, std::int64_t lo, std::int64_t hi);

}  // namespace hwt::sweep
