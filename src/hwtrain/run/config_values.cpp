#include "hwtrain/run/config_values.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"

namespace hwt::config_values {

std::string RawValue::describe() const {
  switch (kind) {
    case Kind::Int: return std::to_string(i);
    case Kind::Float: { std::ostringstream o; o << d; return o.str(); }
    case Kind::Bool: return b ? "true" : "false";
    case Kind::String: return "\"" + s + "\"";
    case Kind::Text: return "'" + s + "'";
  }
  return s;
}

[[noreturn]] void wrong_type(const std::string& key, const RawValue& v, const std::string& want,
                             const std::string& source) {
  throw ConfigError(source + ": " + key + " = " + v.describe() + " has the wrong type: expected " + want);
}

void assign(int64_t& f, const RawValue& v, const std::string& key, const std::string& src) {
  if (v.kind == RawValue::Kind::Int) { f = v.i; return; }
  if (v.kind == RawValue::Kind::Text) {
    errno = 0;
    char* end = nullptr;
    long long x = std::strtoll(v.s.c_str(), &end, 10);
    if (!v.s.empty() && end && *end == '\0' && errno == 0) { f = x; return; }
  }
  wrong_type(key, v, "an integer", src);
}
void assign(std::optional<int64_t>& f, const RawValue& v, const std::string& key, const std::string& src) {
  if ((v.kind == RawValue::Kind::String || v.kind == RawValue::Kind::Text) && v.s == "auto") {
    f.reset();
    return;
  }
  if (v.kind == RawValue::Kind::String) wrong_type(key, v, "an integer or \"auto\"", src);
  int64_t x = 0;
  try {
    assign(x, v, key, src);
  } catch (const ConfigError&) {
    wrong_type(key, v, "an integer or \"auto\"", src);
  }
  f = x;
}
void assign(double& f, const RawValue& v, const std::string& key, const std::string& src) {
  if (v.kind == RawValue::Kind::Int) { f = static_cast<double>(v.i); return; }
  double x = 0;
  bool number = v.kind == RawValue::Kind::Float;
  if (number) x = v.d;
  bool underflow = false;
  if (v.kind == RawValue::Kind::Text) {
    char* end = nullptr;
    errno = 0;
    x = std::strtod(v.s.c_str(), &end);  // "inf", "nan" and 1e400 read as numbers, refused below
    number = !v.s.empty() && end && *end == '\0';
    underflow = errno == ERANGE && std::isfinite(x);
  }
  if (!number) wrong_type(key, v, "a number", src);
  if (!std::isfinite(x)) throw ConfigError(src + ": " + key + " = " + v.describe() + " is not a finite number");
  if (underflow) throw ConfigError(src + ": " + key + " = " + v.describe() + " is too small for a double; use 0");
  f = x;
}
void assign(bool& f, const RawValue& v, const std::string& key, const std::string& src) {
  if (v.kind == RawValue::Kind::Bool) { f = v.b; return; }
  if (v.kind == RawValue::Kind::Text) {
    if (v.s == "true" || v.s == "1" || v.s == "on" || v.s == "yes") { f = true; return; }
    if (v.s == "false" || v.s == "0" || v.s == "off" || v.s == "no") { f = false; return; }
  }
  wrong_type(key, v, "true or false", src);
}
void assign(std::string& f, const RawValue& v, const std::string& key, const std::string& src) {
  if (v.kind == RawValue::Kind::String || v.kind == RawValue::Kind::Text) { f = v.s; return; }
  wrong_type(key, v, "a string", src);
}
[[noreturn]] void not_a_choice(const std::string& key, const RawValue& v, const std::vector<std::string>& choices,
                               const std::string& src) {
  std::vector<std::string> shown;
  for (const auto& c : choices) shown.push_back(c.empty() ? "\"\"" : c);
  throw ConfigError(src + ": " + key + " = " + v.describe() + " is not valid: expected one of " + join(shown) +
                    did_you_mean(v.s, choices));
}

}  // namespace hwt::config_values
