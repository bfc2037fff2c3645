#include "hwtrain/sweep/trial_codec.h"

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/core/json_integer.h"

namespace hwt::sweep {

namespace {

struct TrialStateNameEntry {
  TrialState state;
  const char* name;
};

constexpr TrialStateNameEntry kTrialStateNames[] = {
    {TrialState::kRunning, "running"}, {TrialState::kComplete, "complete"},
    {TrialState::kPruned, "pruned"},   {TrialState::kFailed, "failed"},
    {TrialState::kInterrupted, "interrupted"},
};

}  // namespace

const char* trial_state_name(TrialState state) {
  for (const auto& entry : kTrialStateNames) {
    if (entry.state == state) return entry.name;
  }
  return "unknown";
}

std::optional<TrialState> parse_trial_state(const std::string& name) {
  for (const auto& entry : kTrialStateNames) {
    if (name == entry.name) return entry.state;
  }
  return std::nullopt;
}

std::string params_to_json(const Params& params) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : params) {
    if (const auto* real = std::get_if<double>(&value)) {
      if (!std::isfinite(*real)) {
        throw ConfigError("parameter " + key + " is " + std::to_string(*real) +
                          "; a trial's real parameters must be finite (check the search space's bounds)");
      }
      out[key] = {{"real", *real}};
    } else if (const auto* integer = std::get_if<std::int64_t>(&value)) {
      out[key] = {{"int", *integer}};
    } else {
      out[key] = {{"str", std::get<std::string>(value)}};
    }
  }
  try {
    return out.dump();
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(std::string("trial parameters cannot be stored: ") + e.what() +
                      " (parameter names and values must be UTF-8 text)");
  }
}

Params params_from_json(const std::string& json, const std::string& where) {
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    throw IoError(where + ": params_json is not a JSON object (" + json.substr(0, 80) + "); the file is damaged");
  }
  Params out;
  for (auto it = parsed.begin(); it != parsed.end(); ++it) {
    const auto& typed = it.value();
    const auto bad = [&]() {
      return IoError(where + ": parameter " + it.key() + " is " + typed.dump() +
                     "; expected {\"real\": number}, {\"int\": integer} or {\"str\": text} (the file is damaged)");
    };
    if (!typed.is_object() || typed.size() != 1) throw bad();
    const std::string& tag = typed.begin().key();
    const auto& x = typed.begin().value();
    if (tag == "real" && x.is_number()) {
      const double real = x.get<double>();
      if (!std::isfinite(real)) throw bad();
      out[it.key()] = real;
    } else if (tag == "int" && x.is_number_integer()) {
      if (!json_integer_fits<std::int64_t>(x)) throw bad();
      out[it.key()] = x.get<std::int64_t>();
    } else if (tag == "str" && x.is_string()) {
      out[it.key()] = x.get<std::string>();
    } else {
      throw bad();
    }
  }
  return out;
}

}  // namespace hwt::sweep
