#include "hwtrain/sweep/search_space.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"

namespace hwt::sweep {
namespace {

// The shortest %.Ng text (N = 1..17) that strtod reads back to exactly `x`.
std::string round_trip_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

[[noreturn]] void space_error(const ParamSpec& p, const std::string& found, const std::string& valid) {
  throw ConfigError("config: sweep.space." + p.key + " " + found + ": " + valid);
}

std::string range_text(const ParamSpec& p) {
  return "[" + round_trip_text(p.low) + ", " + round_trip_text(p.high) + "]";
}

void validate_range(const ParamSpec& p) {
  if (!std::isfinite(p.low) || !std::isfinite(p.high)) {
    space_error(p, "has range " + range_text(p), "both bounds must be finite numbers");
  }
  if (p.low >= p.high) {
    space_error(p, "has an empty range " + range_text(p), "low must be below high");
  }
  if (p.kind == ParamKind::kInt) {
    if (p.low != std::floor(p.low) || p.high != std::floor(p.high)) {
      space_error(p, "is an int range with bounds " + range_text(p), "both bounds must be integers");
    }
    if (p.log && p.low < 1) {
      space_error(p, "is a log int range " + range_text(p), "low must be at least 1 (set log = false to include 0)");
    }
  }
  if (p.kind == ParamKind::kLogUniform && p.low <= 0) {
    space_error(p, "is a log range " + range_text(p), "low must be > 0 (use uniform to include 0)");
  }
}

void validate_choices(const ParamSpec& p) {
  if (p.choices.empty()) space_error(p, "has an empty choice list", "give at least one choice");
  std::set<std::string> seen;
  for (const auto& c : p.choices) {
    if (!seen.insert(c).second) {
      space_error(p, "lists the choice '" + c + "' twice", "each choice must appear once");
    }
  }
}

}  // namespace

const char* param_kind_name(ParamKind kind) {
  switch (kind) {
    case ParamKind::kUniform: return "uniform";
    case ParamKind::kLogUniform: return "loguniform";
    case ParamKind::kInt: return "int";
    case ParamKind::kChoice: return "choice";
  }
  return "?";
}

void SearchSpace::validate() const {
  std::vector<std::string> keys;
  for (const auto& p : params) {
    if (p.key.empty()) throw ConfigError("config: sweep.space has a parameter with an empty key: name the config key it sets");
    if (std::find(keys.begin(), keys.end(), p.key) != keys.end()) {
      space_error(p, "appears twice", "each key may be searched once");
    }
    keys.push_back(p.key);
    if (p.log && p.kind != ParamKind::kInt) {
      space_error(p, std::string("is a ") + param_kind_name(p.kind) + " with log = true",
                  "log applies to int ranges only; a log-spaced real is kind loguniform");
    }
    if (p.kind == ParamKind::kChoice) {
      validate_choices(p);
    } else {
      validate_range(p);
    }
    if (p.grid_points < 0 || p.grid_points == 1) {
      space_error(p, "has grid_points = " + std::to_string(p.grid_points),
                  "must be 0 (not gridded) or at least 2 (both ends are taken)");
    }
  }
}

const ParamSpec* SearchSpace::find(const std::string& key) const {
  for (const auto& p : params) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

std::string to_override_value(const ParamValue& value) {
  if (const auto* d = std::get_if<double>(&value)) return round_trip_text(*d);
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  return std::get<std::string>(value);
}

std::string fingerprint(const SearchSpace& space) {
  std::vector<const ParamSpec*> sorted;
  for (const auto& p : space.params) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(), [](const ParamSpec* a, const ParamSpec* b) { return a->key < b->key; });
  std::vector<std::string> parts;
  for (const ParamSpec* p : sorted) {
    std::string s = p->key + "=" + param_kind_name(p->kind);
    if (p->kind == ParamKind::kChoice) {
      s += "{" + join(p->choices, ",") + "}";
    } else {
      s += "[" + round_trip_text(p->low) + "," + round_trip_text(p->high) + "]";
      if (p->kind == ParamKind::kInt && p->log) s += "log";
    }
    if (p->grid_points > 0) s += "grid" + std::to_string(p->grid_points);
    parts.push_back(s);
  }
  return join(parts, ";");
}

bool is_value_of(const ParamSpec& spec, const ParamValue& value) {
  switch (spec.kind) {
    case ParamKind::kUniform:
    case ParamKind::kLogUniform: {
      const auto* d = std::get_if<double>(&value);
      return d && *d >= spec.low && *d <= spec.high;
    }
    case ParamKind::kInt: {
      const auto* i = std::get_if<std::int64_t>(&value);
      return i && static_cast<double>(*i) >= spec.low && static_cast<double>(*i) <= spec.high;
    }
    case ParamKind::kChoice: {
      const auto* s = std::get_if<std::string>(&value);
      return s && std::find(spec.choices.begin(), spec.choices.end(), *s) != spec.choices.end();
    }
  }
  return false;
}

}  // namespace hwt::sweep
