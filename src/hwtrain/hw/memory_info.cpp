// Memory detection from /proc/meminfo and cgroups (see memory_info.h).
#include "hwtrain/hw/memory_info.h"

#include <algorithm>
#include <sstream>

#include "hwtrain/hw/cgroup.h"
#include "hwtrain/hw/sysfs.h"

namespace hwt {
namespace {

int64_t meminfo_bytes(const std::string& meminfo, const std::string& key) {
  std::string v = sysfs::colon_value(meminfo, key);  // "24684096 kB"
  std::istringstream in(v);
  int64_t n = 0;
  std::string unit;
  if (!(in >> n)) return 0;
  in >> unit;
  return unit == "kB" ? n * 1024 : n;
}

}  // namespace

MemoryInfo memory_from_meminfo(const std::string& meminfo, int64_t cgroup_limit_bytes,
                               int64_t cgroup_usage_bytes) {
  MemoryInfo m;
  m.total_bytes = meminfo_bytes(meminfo, "MemTotal");
  m.available_bytes = meminfo_bytes(meminfo, "MemAvailable");
  if (m.available_bytes == 0)  // kernels before 3.14 lack MemAvailable
    m.available_bytes = meminfo_bytes(meminfo, "MemFree") + meminfo_bytes(meminfo, "Cached");
  m.cgroup_limit_bytes = cgroup_limit_bytes;
  m.cgroup_usage_bytes = cgroup_limit_bytes > 0 ? std::max<int64_t>(cgroup_usage_bytes, 0) : 0;
  m.effective_total_bytes = m.total_bytes;
  m.effective_available_bytes = m.available_bytes;
  if (cgroup_limit_bytes > 0) {
    m.effective_total_bytes = std::min(m.total_bytes, cgroup_limit_bytes);
    int64_t room = std::max<int64_t>(cgroup_limit_bytes - m.cgroup_usage_bytes, 0);
    m.effective_available_bytes = std::min(m.available_bytes, room);
  }
  return m;
}

MemoryInfo detect_memory() {
  int64_t limit = cgroup_memory_limit();
  return memory_from_meminfo(sysfs::read_text("/proc/meminfo"), limit,
                             limit > 0 ? cgroup_memory_usage() : 0);
}

}  // namespace hwt
