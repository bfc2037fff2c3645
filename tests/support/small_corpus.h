// The small "%"-separated corpus of the end-to-end training tests: 600 short documents.
#pragma once
#include <string>

namespace hwt::testing {

inline std::string small_corpus() {
  std::string text;
  for (int i = 0; i < 600; ++i) text += "Line " + std::to_string(i * 7919 % 1000) + " of a small corpus.\n%\n";
  return text;
}

}  // namespace hwt::testing
