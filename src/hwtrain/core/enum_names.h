// A mode's names, in one table next to its enum: what TOML, --set, plan.json and messages spell it.
//   enum class Progress { kBar, kLines };
//   template <> struct EnumNames<Progress> {
//     static constexpr std::array<std::pair<Progress, const char*>, 2> table{{{Progress::kBar, "bar"},
//                                                                              {Progress::kLines, "lines"}}};
//   };
// An options field of such an enum type is read and written by name (run/run_config.cpp); one of
// type std::optional<Enum> also takes "auto", read as empty: the planner decides.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace hwt {

template <class E>
struct EnumNames;  // specialised next to each mode's enum

template <class E, class = void>
struct HasEnumNames : std::false_type {};
template <class E>
struct HasEnumNames<E, std::void_t<decltype(EnumNames<E>::table)>> : std::true_type {};

template <class T>
struct IsOptionalEnum : std::false_type {};
template <class E>
struct IsOptionalEnum<std::optional<E>> : HasEnumNames<E> {};

// The name of `value` (every enumerator is in its table; a missing one is a programming error).
template <class E>
const char* enum_name(E value) {
  for (const auto& [v, name] : EnumNames<E>::table) {
    if (v == value) return name;
  }
  return "?";
}

template <class E>
std::optional<E> enum_from_name(const std::string& name) {
  for (const auto& [v, n] : EnumNames<E>::table) {
    if (name == n) return v;
  }
  return std::nullopt;
}

// Every name, in table order (for "expected one of" messages and --help-config).
template <class E>
std::vector<std::string> enum_choices() {
  std::vector<std::string> out;
  for (const auto& entry : EnumNames<E>::table) out.emplace_back(entry.second);
  return out;
}

// The name of an optional mode: "auto" when empty.
template <class E>
std::string enum_name(const std::optional<E>& value) {
  return value ? enum_name(*value) : "auto";
}

// The names a field of type F (a mode, or an optional one: "auto" first) accepts.
template <class F>
std::vector<std::string> field_choices() {
  if constexpr (IsOptionalEnum<F>::value) {
    std::vector<std::string> out{"auto"};
    for (auto& name : enum_choices<typename F::value_type>()) out.push_back(name);
    return out;
  } else {
    return enum_choices<F>();
  }
}

// A field as written to TOML/JSON: a mode by its name, anything else as it is.
template <class F>
auto written(const F& field) {
  if constexpr (HasEnumNames<F>::value) {
    return std::string(enum_name(field));
  } else if constexpr (IsOptionalEnum<F>::value) {
    return enum_name(field);
  } else {
    return field;
  }
}

}  // namespace hwt
