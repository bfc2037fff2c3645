// cgroup limits of this process: CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us / cfs_period_us) and
// memory limit and usage (v2 memory.max / memory.current, v1 memory.limit_in_bytes /
// usage_in_bytes). The process's cgroup directories come from /proc/self/cgroup and
// /proc/self/mountinfo; limits are the smallest along the path up to the mount root, because a
// parent's limit binds its children. The parsers are separate and pure so tests can feed them text.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hwt {

struct CgroupDirs {
  std::vector<std::string> v2;         // this process's v2 directory, then its ancestors
  std::vector<std::string> v1_cpu;     // the same for the v1 cpu controller
  std::vector<std::string> v1_memory;  // and the v1 memory controller
};

// Locates the directories from the texts of /proc/self/cgroup and /proc/self/mountinfo.
CgroupDirs find_cgroup_dirs(const std::string& proc_cgroup, const std::string& mountinfo);

// "max 100000" -> 0 (no limit); "150000 100000" -> 1.5 CPUs.
double parse_cpu_max(const std::string& text);
// v1: quota -1 (or <= 0) means no limit.
double cfs_quota_cpus(int64_t quota_us, int64_t period_us);
// "max" -> 0; a byte count -> that count; v1's "unlimited" 2^63-ish values -> 0.
int64_t parse_memory_limit(const std::string& text);
// The value of `key` in a memory.stat text ("inactive_file 1234"), 0 when absent.
int64_t parse_stat_value(const std::string& text, const std::string& key);

// For this process (0 = no limit / unknown).
double cgroup_cpu_quota();
int64_t cgroup_memory_limit();
// Usage minus inactive file pages (the kernel reclaims those before an OOM kill); 0 = unknown.
int64_t cgroup_memory_usage();

}  // namespace hwt
