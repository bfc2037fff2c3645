#include "py_config.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"

namespace py = pybind11;

namespace hwt::pymod {

namespace {

ConfigValue to_value(const std::string& key, const py::handle& v, const std::string& source) {
  ConfigValue out;
  if (py::isinstance<py::bool_>(v)) {  // before int: bool is an int in Python
    out.kind = ConfigValue::Kind::Bool;
    out.b = v.cast<bool>();
  } else if (py::isinstance<py::int_>(v)) {
    out.kind = ConfigValue::Kind::Int;
    try {
      out.i = v.cast<int64_t>();
    } catch (const py::cast_error&) {
      throw ConfigError(source + ": " + key + " = " + py::str(v).cast<std::string>() + " does not fit in 64 bits");
    }
  } else if (py::isinstance<py::float_>(v)) {
    out.kind = ConfigValue::Kind::Float;
    out.d = v.cast<double>();
  } else if (py::isinstance<py::str>(v)) {
    out.s = v.cast<std::string>();
  } else {
    throw ConfigError(source + ": " + key + " must be a number, boolean or string, not " +
                      py::str(py::type::of(v).attr("__name__")).cast<std::string>() + " (" +
                      py::repr(v).cast<std::string>() + ")");
  }
  return out;
}

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Shortest text that reads back as the same double.
std::string float_text(double d) {
  for (int digits = 15; digits <= 17; ++digits) {
    std::string s = fmt::format("{:.{}g}", d, digits);
    if (std::strtod(s.c_str(), nullptr) == d) return s;
  }
  return fmt::format("{:.17g}", d);
}

std::string toml_scalar(const ConfigValue& v) {
  switch (v.kind) {
    case ConfigValue::Kind::Bool: return v.b ? "true" : "false";
    case ConfigValue::Kind::Int: return std::to_string(v.i);
    case ConfigValue::Kind::Float: {
      if (std::isnan(v.d)) return "nan";
      if (std::isinf(v.d)) return v.d > 0 ? "inf" : "-inf";
      std::string s = float_text(v.d);
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";  // TOML: 2.0, not 2
      return s;
    }
    case ConfigValue::Kind::String: return toml_string(v.s);
  }
  return "";
}

std::string assignment_text(const ConfigValue& v) {
  switch (v.kind) {
    case ConfigValue::Kind::Bool: return v.b ? "true" : "false";
    case ConfigValue::Kind::Int: return std::to_string(v.i);
    case ConfigValue::Kind::Float: return float_text(v.d);
    case ConfigValue::Kind::String: return v.s;
  }
  return "";
}

// The items as one TOML document ([table] "key" = value), so that RunConfig reads them typed,
// with its own messages. Every key is "table.name": anything else is the unknown-key error.
std::string items_as_toml(const ConfigInput& input) {
  std::map<std::string, std::string> tables;  // TOML forbids a table defined twice: group them
  std::vector<std::string> order;
  for (const auto& [key, value] : input.items) {
    const auto dot = key.find('.');
    if (dot == std::string::npos || dot == 0 || key.find('.', dot + 1) != std::string::npos) {
      throw ConfigError(input.source + ": unknown key '" + key + "'" + did_you_mean(key, RunConfig::all_keys()) +
                        "; keys are 'table.name' ('hwtrain train --help-config' lists every key)");
    }
    const std::string table = key.substr(0, dot);
    if (!tables.count(table)) order.push_back(table);
    tables[table] += toml_string(key.substr(dot + 1)) + " = " + toml_scalar(value) + "\n";
  }
  std::string doc;
  for (const auto& t : order) doc += "[" + toml_string(t) + "]\n" + tables[t];
  return doc;
}

}  // namespace

ConfigInput config_input(const std::string& file, const py::sequence& items, const std::string& source) {
  ConfigInput input;
  input.file = file;
  input.source = source;
  for (const auto& item : items) {
    auto pair = item.cast<py::sequence>();
    if (py::len(pair) != 2) throw ConfigError(source + ": expected (key, value) pairs");
    const std::string key = py::str(pair[0]).cast<std::string>();
    input.items.emplace_back(key, to_value(key, pair[1], source));
  }
  return input;
}

RunConfig read_config(const ConfigInput& input, bool validate) {
  RunConfig config;
  if (!input.file.empty()) config.apply_toml(read_file(input.file), input.file);
  if (!input.items.empty()) config.apply_toml(items_as_toml(input), input.source);
  if (validate) config.validate();
  return config;
}

std::vector<std::string> override_assignments(const ConfigInput& input) {
  std::vector<std::string> out;
  for (const auto& [key, value] : input.items) out.push_back(key + "=" + assignment_text(value));
  return out;
}

}  // namespace hwt::pymod
