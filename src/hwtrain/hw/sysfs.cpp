// Quiet /proc and /sys readers (see sysfs.h).
#include "hwtrain/hw/sysfs.h"

#include <cctype>
#include <fstream>
#include <sstream>

namespace hwt::sysfs {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t read_int(const std::string& path, int64_t fallback) {
  std::string t = trim(read_text(path));
  if (t.empty()) return fallback;
  try {
    size_t used = 0;
    long long v = std::stoll(t, &used);
    return used == t.size() ? static_cast<int64_t>(v) : fallback;
  } catch (const std::exception&) {
    return fallback;
  }
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  for (const std::string& raw : split(trim(text), ',')) {
    std::string part = trim(raw);
    if (part.empty()) continue;
    try {
      size_t dash = part.find('-');
      if (dash == std::string::npos) {
        cpus.push_back(std::stoi(part));
      } else {
        int lo = std::stoi(part.substr(0, dash)), hi = std::stoi(part.substr(dash + 1));
        for (int c = lo; c <= hi && hi - lo < 65536; ++c) cpus.push_back(c);
      }
    } catch (const std::exception&) {
      continue;
    }
  }
  return cpus;
}

std::string colon_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return "";
}

int64_t parse_size_suffix(const std::string& text) {
  std::string t = trim(text);
  if (t.empty()) return 0;
  int64_t mult = 1;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
  if (last == 'K') mult = 1024;
  if (last == 'M') mult = 1024 * 1024;
  if (last == 'G') mult = int64_t{1024} * 1024 * 1024;
  if (mult != 1) t.pop_back();
  try {
    return static_cast<int64_t>(std::stoll(t)) * mult;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace hwt::sysfs
