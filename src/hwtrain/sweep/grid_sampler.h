// GridSampler: the Cartesian product of every parameter's grid values, each combination once, in a
// fixed order (the first parameter of the space varies slowest), skipping combinations already in the
// history in any state. Grid values: a choice's literals in order; grid_points evenly spaced values
// on a real range, ends included (log-spaced on a log range; interior points rounded to 15
// significant digits, so 1e-4..1e-2 gives 0.001); on an int range the same values rounded
// and deduplicated, or every integer when grid_points is 0.
// It does not shuffle or subsample the grid; the sweep stops after size() trials.
#pragma once
#include <cstddef>

#include "hwtrain/sweep/sampler.h"

namespace hwt::sweep {

class GridSampler : public Sampler {
 public:
  // The first combination not yet in `history`. Throws ConfigError when a range cannot be gridded
  // (a real range without grid_points, an int range of more than kMaxIntGridPoints integers without
  // grid_points) and hwt::Error when every combination has been tried. `seed` is not used.
  Params sample(const SearchSpace& space, const std::vector<Trial>& history, std::uint64_t seed) override;
  std::string name() const override { return "grid"; }

  // The number of combinations (product of the per-parameter counts). Throws as sample() does.
  static std::size_t size(const SearchSpace& space);
  // The grid values of one parameter, in visiting order. Throws ConfigError as sample() does.
  static std::vector<ParamValue> grid_values(const ParamSpec& spec);
};

}  // namespace hwt::sweep
