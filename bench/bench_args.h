// The benchmarks' one option parser: the value after `--name` on the command line, or a fallback.
#pragma once
#include <cstring>
#include <string>

namespace hwt::bench {

inline std::string arg(int argc, char** argv, const char* name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

}  // namespace hwt::bench
