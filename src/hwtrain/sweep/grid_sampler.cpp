#include "hwtrain/sweep/grid_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "hwtrain/core/error.h"

namespace hwt::sweep {
namespace {

// `x` to 15 significant digits, so that a grid point computed as 0.0009999999999999998 is the
// 0.001 a user expects to see in --set and in the study.
double grid_tidy(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", x);
  return std::strtod(buf, nullptr);
}

// `n` evenly spaced points on [lo, hi] (in log space when `log`), both ends exact.
std::vector<double> grid_spaced_points(double lo, double hi, int n, bool log) {
  std::vector<double> xs;
  const double a = log ? std::log(lo) : lo, b = log ? std::log(hi) : hi;
  for (int i = 0; i < n; ++i) {
    const double t = a + (b - a) * static_cast<double>(i) / static_cast<double>(n - 1);
    xs.push_back(i == 0 ? lo : i == n - 1 ? hi : std::clamp(grid_tidy(log ? std::exp(t) : t), lo, hi));
  }
  return xs;
}

// The key of one combination: the override text of each value, in space order.
std::string grid_combination_key(const SearchSpace& space, const Params& params) {
  std::string key;
  for (const auto& spec : space.params) {
    auto it = params.find(spec.key);
    key += it == params.end() ? std::string("\x01missing") : to_override_value(it->second);
    key += '\x1f';
  }
  return key;
}

}  // namespace

std::vector<ParamValue> GridSampler::grid_values(const ParamSpec& spec) {
  std::vector<ParamValue> values;
  if (spec.kind == ParamKind::kChoice) {
    for (const auto& c : spec.choices) values.emplace_back(c);
    return values;
  }
  if (spec.kind == ParamKind::kInt) {
    const auto lo = static_cast<std::int64_t>(spec.low), hi = static_cast<std::int64_t>(spec.high);
    if (spec.grid_points == 0) {
      if (hi - lo + 1 > kMaxIntGridPoints) {
        throw ConfigError("config: sweep.space." + spec.key + " is an int range of " + std::to_string(hi - lo + 1) +
                          " integers: the grid takes every integer only up to " + std::to_string(kMaxIntGridPoints) +
                          "; set grid_points on sweep.space." + spec.key);
      }
      for (std::int64_t i = lo; i <= hi; ++i) values.emplace_back(i);
      return values;
    }
    std::set<std::int64_t> seen;
    for (double x : grid_spaced_points(spec.low, spec.high, spec.grid_points, spec.log)) {
      const auto i = static_cast<std::int64_t>(std::llround(x));
      if (seen.insert(i).second) values.emplace_back(i);
    }
    return values;
  }
  if (spec.grid_points == 0) {
    throw ConfigError("config: sweep.space." + spec.key + " is a " + param_kind_name(spec.kind) +
                      " range: grid needs grid_points on sweep.space." + spec.key + " (how many values to try, >= 2)");
  }
  for (double x : grid_spaced_points(spec.low, spec.high, spec.grid_points, spec.kind == ParamKind::kLogUniform)) {
    values.emplace_back(x);
  }
  return values;
}

std::size_t GridSampler::size(const SearchSpace& space) {
  std::size_t n = 1;
  for (const auto& spec : space.params) n *= grid_values(spec).size();
  return n;
}

Params GridSampler::sample(const SearchSpace& space, const std::vector<Trial>& history, std::uint64_t /*seed*/) {
  std::vector<std::vector<ParamValue>> axes;
  for (const auto& spec : space.params) axes.push_back(grid_values(spec));
  std::set<std::string> tried;
  for (const auto& t : history) tried.insert(grid_combination_key(space, t.params));

  const std::size_t total = size(space);
  std::vector<std::size_t> index(axes.size(), 0);  // mixed-radix counter, last axis fastest
  for (std::size_t n = 0; n < total; ++n) {
    Params params;
    for (std::size_t a = 0; a < axes.size(); ++a) params[space.params[a].key] = axes[a][index[a]];
    if (!tried.count(grid_combination_key(space, params))) return params;
    for (std::size_t a = axes.size(); a-- > 0;) {
      if (++index[a] < axes[a].size()) break;
      index[a] = 0;
    }
  }
  throw Error("sweep: the grid sampler has tried all " + std::to_string(total) +
              " combinations of the space; a grid sweep runs at most GridSampler::size() trials");
}

}  // namespace hwt::sweep
