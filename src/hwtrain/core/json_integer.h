// Reading integers from untrusted JSON: nlohmann's get<int>() / get<int64_t>() of a float such as
// 4e45 is undefined behaviour, and of a negative or huge integer wraps. Check first, then convert.
// (Found by the fuzzers: sharding_manifest, then tokenizer_json.)
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>

namespace hwt {

// Whether `v` is a JSON integer (not a float, bool or string) that T holds: no float converted, no
// negative number wrapped into an unsigned type (2e+256 into uint64_t: found by fuzz/dataset_manifest).
template <class T>
bool json_integer_fits(const nlohmann::json& v) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= kMax;
  if (!v.is_number_integer()) return false;
  const int64_t x = v.get<int64_t>();
  if (x >= 0) return static_cast<uint64_t>(x) <= kMax;
  return std::numeric_limits<T>::is_signed && x >= static_cast<int64_t>(std::numeric_limits<T>::min());
}

// Whether `v` is a JSON integer (not a float, bool or string) in [lo, hi].
inline bool is_json_integer_in(const nlohmann::json& v, int64_t lo, int64_t hi) {
  if (v.is_number_unsigned()) {  // non-negative literals parse as unsigned
    const uint64_t u = v.get<uint64_t>();
    return u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo));
  }
  return v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
}

}  // namespace hwt
