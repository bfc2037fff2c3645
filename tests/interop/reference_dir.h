// The tensors and model directories of Hugging Face transformers (tests/interop/reference/hf_reference.py),
// made once per build tree (support/python_reference.h); empty when the test python lacks transformers.
#pragma once
#include <cstdlib>
#include <string>

#include "support/python_reference.h"

namespace hwt::testing {

inline const std::string& hf_reference_dir() {
  static const std::string made = python_reference("transformers", "interop/reference/hf_reference.py", "");
  return made;
}

}  // namespace hwt::testing
