#include "hwtrain/sweep/sampler.h"

namespace hwt::sweep {

Sampler::~Sampler() = default;

std::uint64_t trial_seed(std::uint64_t study_seed, std::int64_t trial_number) {
  // splitmix64 (Steele, Lea, Flood 2014) applied twice: once to the study seed, once mixed with the trial.
  auto mix = [](std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return mix(mix(study_seed) ^ static_cast<std::uint64_t>(trial_number));
}

double u01(SweepRng& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

std::int64_t uniform_int(SweepRng& rng, std::int64_t lo, std::int64_t hi) {
  const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);  // values - 1
  if (span == ~std::uint64_t{0}) return static_cast<std::int64_t>(rng());
  const std::uint64_t n = span + 1;
  // Reject the top partial block of 2^64 so that every residue is equally likely.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n + 1) % n;
  std::uint64_t x;
  do {
    x = rng();
  } while (x > limit);
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + x % n);
}

}  // namespace hwt::sweep
