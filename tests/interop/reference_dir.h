// The reference tensors and model directory that Hugging Face transformers writes for the interop
// tests (tests/interop/reference/hf_reference.py), made once per test process; empty when
// the test python has no transformers (the tests then skip, saying so).
#pragma once
#include <cstdlib>
#include <string>

#include "support/temp_dir.h"

namespace hwt::testing {

inline const std::string& hf_reference_dir() {
  static TempDir dir;
  static const std::string made = [] {
    const std::string cmd = std::string(HWTRAIN_PYTHON) + " -c 'import transformers' 2>/dev/null && " +
                            HWTRAIN_PYTHON + " " + HWTRAIN_SOURCE_DIR +
                            "/tests/interop/reference/hf_reference.py '" + dir.path().string() + "'";
    return std::system(cmd.c_str()) == 0 ? dir.path().string() : std::string();
  }();
  return made;
}

}  // namespace hwt::testing
