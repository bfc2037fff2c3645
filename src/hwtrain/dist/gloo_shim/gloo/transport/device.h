// hwtrain shim (see ../../README.md): Gloo transport types, only held through smart pointers.
#pragma once

namespace gloo {
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo
