#include "hwtrain/core/option_checks.h"

#include <sstream>

#include "hwtrain/core/error.h"

namespace hwt {

void option_range_error(const std::string& key, const std::string& value, const std::string& valid) {
  throw ConfigError("config: " + key + " = " + value + " is out of range: " + valid);
}

std::string option_text(double value) {
  std::ostringstream o;
  o << value;
  return o.str();
}

void check_at_least(const std::string& key, int64_t value, int64_t min) {
  if (value < min) option_range_error(key, std::to_string(value), "must be at least " + std::to_string(min));
}

void check_in_range(const std::string& key, double value, double lo, double hi, bool hi_inclusive) {
  if (!(value >= lo) || (hi_inclusive ? value > hi : value >= hi)) {
    option_range_error(key, option_text(value),
                       "must be in [" + option_text(lo) + ", " + option_text(hi) + (hi_inclusive ? "]" : ")"));
  }
}

void check_positive(const std::string& key, double value) {
  if (!(value > 0)) option_range_error(key, option_text(value), "must be > 0");
}

void check_non_negative(const std::string& key, double value, const std::string& note) {
  if (!(value >= 0)) option_range_error(key, option_text(value), "must be >= 0" + (note.empty() ? "" : " (" + note + ")"));
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

std::string divisors_text(int64_t n) {
  std::string out;
  for (int64_t d : divisors(n)) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out;
}

}  // namespace hwt
