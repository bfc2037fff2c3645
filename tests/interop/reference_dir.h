// Reference files that Python writes for equality tests, made once per test process: the tensors
// and model directories of Hugging Face transformers (tests/interop/reference/hf_reference.py);
// empty when the test python lacks the module (the tests then skip, saying so).
#pragma once
#include <cstdlib>
#include <string>

#include "support/temp_dir.h"

namespace hwt::testing {

// Runs tests/<script> with the test python into a fresh directory when the python imports
// `module`; the directory, or "" when it does not (or the script fails).
inline std::string python_reference(const std::string& module, const std::string& script, const std::string& args,
                                    const TempDir& dir) {
  const std::string cmd = std::string(HWTRAIN_PYTHON) + " -c 'import " + module + "' 2>/dev/null && " +
                          HWTRAIN_PYTHON + " " + HWTRAIN_SOURCE_DIR + "/tests/" + script + " '" +
                          dir.path().string() + "' " + args;
  return std::system(cmd.c_str()) == 0 ? dir.path().string() : std::string();
}

inline const std::string& hf_reference_dir() {
  static TempDir dir;
  static const std::string made = python_reference("transformers", "interop/reference/hf_reference.py", "", dir);
  return made;
}

}  // namespace hwt::testing
