// Range checks for the options structs' validate() functions, each next to its struct's fields.
// Every failure is a ConfigError of one line: "config: KEY = VALUE is out of range: WHAT IS VALID".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hwt {

[[noreturn]] void option_range_error(const std::string& key, const std::string& value, const std::string& valid);
std::string option_text(double value);  // as a user would write it: 0.1, 1e-08, 3
void check_at_least(const std::string& key, int64_t value, int64_t min);
// value in [lo, hi] (hi_inclusive) or [lo, hi); NaN is out of range.
void check_in_range(const std::string& key, double value, double lo, double hi, bool hi_inclusive);
void check_positive(const std::string& key, double value);                           // > 0
void check_non_negative(const std::string& key, double value, const std::string& note);  // >= 0 (note: "0 = off")
// The divisors of n, ascending, and as an error names them ("1, 2, 3, 6"): the valid values of a
// setting that must divide n.
std::vector<int64_t> divisors(int64_t n);
std::string divisors_text(int64_t n);

}  // namespace hwt
