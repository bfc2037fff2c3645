// Monotonic time for measuring phases of a step: seconds_since(t) with t from Clock::now().
#pragma once
#include <chrono>

namespace hwt {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace hwt
