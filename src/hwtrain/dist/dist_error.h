// DistError: a failure of the distributed run itself (a rank died, hung or never joined; the
// master cannot be reached). The message names the rank and what to check. Configuration
// mistakes (bad environment values, port in use, mismatched configs) are ConfigErrors instead.
#pragma once
#include "hwtrain/core/error.h"

namespace hwt {

class DistError : public Error {
 public:
  using Error::Error;
  const char* kind() const override { return "distributed error"; }
};

}  // namespace hwt
