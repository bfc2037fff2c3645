// A run configuration as the Python API gives it, read into hwtrain's RunConfig by the same code
// as `hwtrain train --config FILE --set key=value`: an optional TOML file, then (key, value) items
// whose keys are dotted RunConfig keys ("model.n_layer") and whose values are Python scalars (the
// pure-Python package flattens nested dicts and kwargs into these items). Typed like a TOML file:
// 2 is an integer, 2.0 a float, "2" a string, so a wrong type is the ConfigError a TOML file gets.
// Not here: running anything (py_train.cpp, py_info.cpp).
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/run/run_config.h"

namespace hwt::pymod {

// One value of an item, converted from Python while the GIL is held.
struct ConfigValue {
  enum class Kind { Bool, Int, Float, String };
  Kind kind = Kind::String;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
};

struct ConfigInput {
  std::string file;    // a TOML file; empty = none
  std::vector<std::pair<std::string, ConfigValue>> items;
  std::string source;  // names the items in messages: "hwtrain.train(config)"
};

// Reads `items` (a sequence of (key, value) pairs). A value that is not a bool, int, float or str
// is a ConfigError naming the key.
ConfigInput config_input(const std::string& file, const pybind11::sequence& items, const std::string& source);

// Defaults, then the file, then the items (keys and types checked; ConfigError naming the key).
// `validate` adds RunConfig::validate()'s range and cross-field checks.
RunConfig read_config(const ConfigInput& input, bool validate = true);

// The items as `--set key=value` assignments, for the commands that take ConfigOptions.
std::vector<std::string> override_assignments(const ConfigInput& input);

}  // namespace hwt::pymod
