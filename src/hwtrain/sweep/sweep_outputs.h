// What a sweep leaves for its user: a text table of the study's trials, best first, and the best
// trial's train config as a TOML file that `hwtrain train --config` takes as it is (the base config
// with the trial's parameters set, each with the TOML type hwtrain reads), written atomically.
// The base config is re-serialized by toml++: its values are kept, its comments and layout are not.
// It does not choose the best trial's rerun or print anything itself.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hwtrain/sweep/sweep_config.h"
#include "hwtrain/sweep/trial.h"

namespace hwt::sweep {

// One row per trial: number, state, objective (as reported: un-negated for direction = max),
// seconds (from `seconds`, else the study's start and end of the trial, "-" when unknown),
// parameters, reason. Complete trials first, best first; then pruned (best last value first), then
// the rest by number.
std::string format_trials_table(const std::vector<Trial>& trials, const std::string& objective,
                                Direction direction, const std::map<std::int64_t, double>& seconds = {});

// Whether the run's config reads `literal` for `key` as text: a string key's choice "42" stays the
// string "42" (an integer there would not load). Empty: by the literal alone.
using IsTextValue = std::function<bool(const std::string& key, const std::string& literal)>;

// `base_toml` (a train config's text; "" = none) with `params` set: "train.lr" becomes lr in [train].
// Reals and integers keep their type; a choice literal is written as a string where `is_text` says
// the key takes text, else as the TOML value it reads as ("true" -> true, "4" -> 4, "0.1" -> 0.1)
// and as a string otherwise ("bf16"). `header` lines are written first as comments. Throws
// ConfigError naming `base_source` when the base is not valid TOML or a key's table is a value there.
std::string best_config_toml(const std::string& base_toml, const std::string& base_source, const Params& params,
                             const std::string& header, const IsTextValue& is_text = {});

// Reads `base_config` ("" = none), writes best_config_toml(...) to `out` atomically (temp, fsync,
// rename). Throws IoError naming the path when it cannot.
void write_best_config(const std::filesystem::path& out, const std::filesystem::path& base_config,
                       const Params& params, const std::string& header, const IsTextValue& is_text = {});

}  // namespace hwt::sweep
