// How a RunConfig is written out, as visitors of its options structs (visit_tables): the list of
// keys, TOML, TOML with each key's description above it (--help-config), JSON. Internal to
// run/run_config.cpp; reading (TOML files, --set) is there.
#pragma once
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "hwtrain/core/enum_names.h"
#include "hwtrain/core/strings.h"

namespace hwt::config_writers {

// `table[name] = field`, a count the planner may choose (std::optional<int64_t>) as "auto" when empty.
template <class Table, class F>
void put(Table& table, const std::string& name, const F& f) {
  if constexpr (std::is_same_v<F, std::optional<int64_t>>) {
    if (f) {
      table.insert_or_assign(name, *f);
    } else {
      table.insert_or_assign(name, "auto");
    }
  } else {
    table.insert_or_assign(name, written(f));
  }
}
template <class F>
nlohmann::ordered_json json_value(const F& f) {
  if constexpr (std::is_same_v<F, std::optional<int64_t>>) {
    return f ? nlohmann::ordered_json(*f) : nlohmann::ordered_json("auto");
  } else {
    return written(f);
  }
}

struct KeyLister {
  std::vector<std::string> keys;
  std::string prefix;
  template <class T>
  void table(const std::string& name, T& options) {
    prefix = name + ".";
    options.visit(*this);
  }
  template <class F>
  void operator()(const std::string& name, F&, const char*) { keys.push_back(prefix + name); }
  template <class F>
  void operator()(const std::string& name, F&, const char*, const std::vector<std::string>&) {
    keys.push_back(prefix + name);
  }
};

struct TomlWriter {
  toml::table root;
  toml::table* current = nullptr;
  template <class T>
  void table(const std::string& name, T& options) {
    root.insert_or_assign(name, toml::table{});
    current = root[name].as_table();
    options.visit(*this);
  }
  template <class F>
  void operator()(const std::string& name, F& f, const char*) { put(*current, name, f); }
  template <class F>
  void operator()(const std::string& name, F& f, const char*, const std::vector<std::string>&) {
    current->insert_or_assign(name, f);
  }
};

struct JsonWriter {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  nlohmann::ordered_json* current = nullptr;
  template <class T>
  void table(const std::string& name, T& options) {
    root[name] = nlohmann::ordered_json::object();
    current = &root[name];
    options.visit(*this);
  }
  template <class F>
  void operator()(const std::string& name, F& f, const char*) { (*current)[name] = json_value(f); }
  template <class F>
  void operator()(const std::string& name, F& f, const char*, const std::vector<std::string>&) {
    (*current)[name] = f;
  }
};

// TOML with a "# description" line above each key.
struct DocumentedTomlWriter {
  std::ostringstream out;
  template <class T>
  void table(const std::string& name, T& options) {
    out << (out.tellp() > 0 ? "\n[" : "[") << name << "]\n";
    options.visit(*this);
  }
  template <class F>
  void operator()(const std::string& name, F& f, const char* doc) {
    toml::table one;
    put(one, name, f);
    std::string described = doc;
    if constexpr (HasEnumNames<F>::value || IsOptionalEnum<F>::value) {
      described += " (one of: " + join(field_choices<F>()) + ")";
    }
    out << "# " << described << "\n" << toml::toml_formatter(one, toml::format_flags::none) << "\n";
  }
  template <class F>
  void operator()(const std::string& name, F& f, const char* doc, const std::vector<std::string>& choices) {
    std::vector<std::string> shown;
    for (const auto& c : choices) shown.push_back(c.empty() ? "\"\"" : c);
    (*this)(name, f, (std::string(doc) + " (one of: " + join(shown) + ")").c_str());
  }
};

}  // namespace hwt::config_writers
