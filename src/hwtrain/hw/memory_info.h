// Memory detection: MemTotal / MemAvailable from /proc/meminfo and the cgroup limit; the
// effective figures are the smaller of the two, which is what a training run can actually use.
#pragma once
#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

MemoryInfo detect_memory();

// Fills total/available from a /proc/meminfo text (kB values) and applies the cgroup figures
// (0 = no limit) to the effective fields.
MemoryInfo memory_from_meminfo(const std::string& meminfo, int64_t cgroup_limit_bytes,
                               int64_t cgroup_usage_bytes);

}  // namespace hwt
