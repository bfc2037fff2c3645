// How a RunConfig reads a value into its field (TOML files and --set alike): the value as written
// (RawValue), its conversion to the field's type with one-line errors naming the key, and the
// visitor that finds a key's field. Internal to run/run_config.cpp, as config_writers.h is for
// writing.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "hwtrain/core/enum_names.h"

namespace hwt::config_values {

// A value before it meets its field: typed (from TOML) or text (from --set).
struct RawValue {
  enum class Kind { Int, Float, Bool, String, Text };
  Kind kind = Kind::Text;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  std::string describe() const;  // as the user wrote it, for messages
};

// ConfigError "SOURCE: KEY = VALUE has the wrong type: expected WANT".
[[noreturn]] void wrong_type(const std::string& key, const RawValue& v, const std::string& want,
                             const std::string& source);
// ConfigError "SOURCE: KEY = VALUE is not valid: expected one of ...", with a "did you mean".
[[noreturn]] void not_a_choice(const std::string& key, const RawValue& v, const std::vector<std::string>& choices,
                               const std::string& src);

void assign(int64_t& f, const RawValue& v, const std::string& key, const std::string& src);
// A count the planner may choose: an integer, or "auto" (empty).
void assign(std::optional<int64_t>& f, const RawValue& v, const std::string& key, const std::string& src);
void assign(double& f, const RawValue& v, const std::string& key, const std::string& src);
void assign(bool& f, const RawValue& v, const std::string& key, const std::string& src);
void assign(std::string& f, const RawValue& v, const std::string& key, const std::string& src);
// A mode (an enum with EnumNames) by its name; an optional one also takes "auto" (empty).
template <class F>
std::enable_if_t<HasEnumNames<F>::value || IsOptionalEnum<F>::value> assign(F& f, const RawValue& v,
                                                                           const std::string& key,
                                                                           const std::string& src) {
  std::string name;
  assign(name, v, key, src);
  if constexpr (IsOptionalEnum<F>::value) {
    if (name == "auto") { f.reset(); return; }
    if (auto e = enum_from_name<typename F::value_type>(name)) { f = *e; return; }
  } else {
    if (auto e = enum_from_name<F>(name)) { f = *e; return; }
  }
  not_a_choice(key, v, field_choices<F>(), src);
}

// Finds the field `key` ("table.name") and assigns `value` to it.
struct Setter {
  std::string key, source;
  const RawValue* value = nullptr;
  std::string table_prefix;
  bool found = false;

  template <class T>
  void table(const std::string& name, T& options) {
    table_prefix = name + ".";
    options.visit(*this);
  }
  template <class F>
  void operator()(const std::string& name, F& field, const char* /*doc*/) {
    if (table_prefix + name != key) return;
    assign(field, *value, key, source);
    found = true;
  }
  void operator()(const std::string& name, std::string& field, const char* doc,
                  const std::vector<std::string>& choices) {
    if (table_prefix + name != key) return;
    std::string old = field;
    (*this)(name, field, doc);
    bool ok = false;
    for (const auto& c : choices) ok = ok || c == field;
    if (!ok) {
      field = old;
      not_a_choice(key, *value, choices, source);
    }
  }
};

}  // namespace hwt::config_values
