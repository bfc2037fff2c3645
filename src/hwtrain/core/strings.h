// Small string helpers used by error messages: edit distance and "did you mean" suggestions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hwt {

// Levenshtein distance between a and b.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word` by edit distance, or "" when none is reasonably close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" when nothing is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// "a, b, c"
std::string join(const std::vector<std::string>& parts, const std::string& sep = ", ");

// Human-readable byte count: "1.5 GiB".
std::string format_bytes(double bytes);

// A duration with three significant digits in a unit that shows them: "1.23 s", "4.56 ms", "789 us".
std::string format_seconds(double seconds);

// 16 lower-case hex digits: "00000000deadbeef".
std::string hex64(uint64_t v);

// One number through a printf format ("%.2f"); "nan" for NaN whatever the format.
std::string format_number(const char* printf_format, double v);

}  // namespace hwt
