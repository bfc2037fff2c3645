// Small quiet readers for /proc and /sys used by hardware detection: a missing or unreadable file
// reads as "" (detection reports "unknown" instead of failing), never an exception.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hwt::sysfs {

// The whole file, or "" when it cannot be read.
std::string read_text(const std::string& path);

// The file's content as an integer, or `fallback` when missing or not a number.
int64_t read_int(const std::string& path, int64_t fallback = 0);

std::string trim(const std::string& s);
std::vector<std::string> split(const std::string& s, char sep);

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; malformed parts are skipped.
std::vector<int> parse_cpu_list(const std::string& text);

// Value after the first "key<spaces>:" line in a "key : value" text (/proc/cpuinfo), or "".
std::string colon_value(const std::string& text, const std::string& key);

// "1024K" / "32M" / "512" (bytes) as in /sys cache sizes -> bytes; 0 when malformed.
int64_t parse_size_suffix(const std::string& text);

}  // namespace hwt::sysfs
