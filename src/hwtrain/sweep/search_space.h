// The search space of a sweep: which config keys vary and over what ranges or choices, its one
// validate(), the text a sampled value takes on the command line (--set key=value) and a fingerprint
// that lets a study refuse to continue on a changed space.
// It does not parse TOML (the sweep command builds a SearchSpace from [sweep.space]) and it does not
// sample (see sampler.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/sweep/trial.h"

namespace hwt::sweep {

enum class ParamKind {
  kUniform,     // real in [low, high]
  kLogUniform,  // real in [low, high], uniform in log space; needs low > 0
  kInt,         // integer in [low, high]; log-spaced when `log` is set (needs low >= 1)
  kChoice,      // one of `choices`, kept as the literal written in the space
};

// "uniform", "loguniform", "int", "choice": the words the TOML space and the messages use.
const char* param_kind_name(ParamKind kind);

struct ParamSpec {
  std::string key;                   // config key, e.g. "train.learning_rate"
  ParamKind kind = ParamKind::kUniform;
  double low = 0.0;                  // lower bound, inclusive (real and int ranges)
  double high = 0.0;                 // upper bound, inclusive (real and int ranges); must exceed low
  bool log = false;                  // int only: sample and grid in log space (a log-uniform int)
  std::vector<std::string> choices;  // choice only: the literals, in the order the grid visits them
  // How many points the grid sampler takes on a real or int range, ends included (log-spaced when
  // the range is log). 0 = not given: the grid refuses a real range without it and takes every
  // integer of an int range (at most kMaxIntGridPoints of them). Ignored by the other samplers.
  int grid_points = 0;
};

// An int range without grid_points is gridded on every integer only up to this many values, so that
// a forgotten grid_points on a wide range (1..1e6) is an error rather than a million trials.
inline constexpr std::int64_t kMaxIntGridPoints = 1000;

struct SearchSpace {
  std::vector<ParamSpec> params;

  // Throws hwt::ConfigError, one line naming "sweep.space.<key>", the value found and what would be
  // valid, for: a duplicate key, a non-finite bound, an empty range (low >= high), a log range with
  // low <= 0 (an int log range needs low >= 1), non-integral int bounds, log set on a non-int, an
  // empty choice list, a repeated choice, and grid_points that is negative or 1.
  void validate() const;

  // The spec for `key`, or nullptr.
  const ParamSpec* find(const std::string& key) const;
};

// The text of `value` as the right-hand side of `--set key=value`: a real with the fewest digits
// that read back (strtod) to the same double, an integer as an integer, a choice literal as-is.
std::string to_override_value(const ParamValue& value);

// A canonical one-line description of the space, e.g.
//   "model.n_layer=int[2,8];train.lr=loguniform[1e-05,0.01];train.dtype=choice{bf16,fp32}"
// Keys are sorted, so reordering [sweep.space] does not change it; anything that changes which values
// can be sampled (kind, bounds, log, choices, grid_points) does. Reals are printed to round-trip.
std::string fingerprint(const SearchSpace& space);

// Whether `value` is a value of `spec`: the right alternative (a double, an int64 or a listed choice)
// inside the bounds. Samplers use it to skip history entries that do not belong to the space.
bool is_value_of(const ParamSpec& spec, const ParamValue& value);

}  // namespace hwt::sweep
