// hwtrain shim (see ../README.md): gloo::Context is only held by shared_ptr in ProcessGroupGloo.hpp.
// setTimeout is declared (never defined or called) because an inline member there names it.
#pragma once
#include <chrono>

namespace gloo {
class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};
}  // namespace gloo
