// CPU detection: vendor, brand, family/model, usable cores and threads (affinity mask and cgroup
// quota), ISA features from cpuid checked against the OS-enabled state (xgetbv), cache sizes and
// frequency. Non-x86 CPUs report arch, counts and caches with every ISA flag false.
#pragma once
#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

CpuInfo detect_cpu();

// Physical cores among `cpus`: distinct (package, core id) pairs, read from /sys topology.
// Falls back to cpus.size() when topology is unavailable.
int count_physical_cores(const std::vector<int>& cpus);

// Applies a cgroup CPU quota (0 = none) to usable counts: a quota of 1.5 CPUs lets 2 threads run.
void apply_cpu_quota(double quota_cpus, int* num_physical_cores, int* num_logical_threads);

}  // namespace hwt
