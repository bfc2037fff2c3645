// cgroup v1/v2 CPU quota and memory limit of this process (see cgroup.h).
#include "hwtrain/hw/cgroup.h"

#include <sstream>

#include "hwtrain/hw/sysfs.h"

namespace hwt {
namespace {

struct Mount {
  std::string root;
  std::string point;
};

// The cgroup mount for a v1 controller ("cpu", "memory") or v2 (controller "").
bool find_mount(const std::string& mountinfo, const std::string& controller, Mount* out) {
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::vector<std::string> pre = sysfs::split(line.substr(0, sep), ' ');
    std::vector<std::string> post = sysfs::split(line.substr(sep + 3), ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    const std::string& fstype = post[0];
    bool match = false;
    if (controller.empty()) {
      match = fstype == "cgroup2";
    } else if (fstype == "cgroup") {
      for (const std::string& opt : sysfs::split(post[2], ','))
        if (opt == controller) match = true;
    }
    if (match) {
      *out = Mount{pre[3], pre[4]};
      return true;
    }
  }
  return false;
}

// The process's cgroup path for a v1 controller, or for v2 (controller ""); "" when none.
std::string cgroup_path(const std::string& proc_cgroup, const std::string& controller) {
  std::istringstream in(proc_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controller.empty()) {
      if (line.substr(0, a) == "0" && controllers.empty()) return path;
    } else {
      for (const std::string& c : sysfs::split(controllers, ','))
        if (c == controller) return path;
    }
  }
  return "";
}

// The process's directory and its ancestors up to the mount point.
std::vector<std::string> chain(const std::string& proc_cgroup, const std::string& mountinfo,
                               const std::string& controller) {
  Mount m;
  if (!find_mount(mountinfo, controller, &m)) return {};
  std::string path = cgroup_path(proc_cgroup, controller);
  if (path.empty()) return {};
  // Inside a cgroup namespace the mount root is the process's own cgroup; strip it.
  if (m.root != "/" && path.rfind(m.root, 0) == 0) path = path.substr(m.root.size());
  std::vector<std::string> dirs;
  std::string rel = path == "/" ? "" : path;
  while (true) {
    dirs.push_back(m.point + rel);
    if (rel.empty()) break;
    size_t slash = rel.rfind('/');
    rel = slash == std::string::npos ? "" : rel.substr(0, slash);
  }
  return dirs;
}

CgroupDirs my_dirs() {
  return find_cgroup_dirs(sysfs::read_text("/proc/self/cgroup"),
                          sysfs::read_text("/proc/self/mountinfo"));
}

// Smallest positive value, treating 0 as "no limit".
template <typename T>
T min_limit(T a, T b) {
  if (a <= 0) return b;
  if (b <= 0) return a;
  return a < b ? a : b;
}

}  // namespace

CgroupDirs find_cgroup_dirs(const std::string& proc_cgroup, const std::string& mountinfo) {
  CgroupDirs d;
  d.v2 = chain(proc_cgroup, mountinfo, "");
  d.v1_cpu = chain(proc_cgroup, mountinfo, "cpu");
  d.v1_memory = chain(proc_cgroup, mountinfo, "memory");
  return d;
}

double parse_cpu_max(const std::string& text) {
  std::istringstream in(text);
  std::string quota;
  int64_t period = 100000;
  if (!(in >> quota) || quota == "max") return 0;
  in >> period;
  try {
    return cfs_quota_cpus(std::stoll(quota), period);
  } catch (const std::exception&) {
    return 0;
  }
}

double cfs_quota_cpus(int64_t quota_us, int64_t period_us) {
  if (quota_us <= 0 || period_us <= 0) return 0;
  return static_cast<double>(quota_us) / static_cast<double>(period_us);
}

int64_t parse_memory_limit(const std::string& text) {
  std::string t = sysfs::trim(text);
  if (t.empty() || t == "max") return 0;
  try {
    long long v = std::stoll(t);
    // v1 writes "unlimited" as LONG_MAX rounded down to a page.
    if (v <= 0 || v >= (int64_t{1} << 60)) return 0;
    return static_cast<int64_t>(v);
  } catch (const std::exception&) {
    return 0;
  }
}

int64_t parse_stat_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

double cgroup_cpu_quota() {
  CgroupDirs d = my_dirs();
  double cpus = 0;
  for (const std::string& dir : d.v2) cpus = min_limit(cpus, parse_cpu_max(sysfs::read_text(dir + "/cpu.max")));
  for (const std::string& dir : d.v1_cpu)
    cpus = min_limit(cpus, cfs_quota_cpus(sysfs::read_int(dir + "/cpu.cfs_quota_us", -1),
                                          sysfs::read_int(dir + "/cpu.cfs_period_us", 0)));
  return cpus;
}

int64_t cgroup_memory_limit() {
  CgroupDirs d = my_dirs();
  int64_t limit = 0;
  for (const std::string& dir : d.v2)
    limit = min_limit(limit, parse_memory_limit(sysfs::read_text(dir + "/memory.max")));
  for (const std::string& dir : d.v1_memory)
    limit = min_limit(limit, parse_memory_limit(sysfs::read_text(dir + "/memory.limit_in_bytes")));
  return limit;
}

int64_t cgroup_memory_usage() {
  CgroupDirs d = my_dirs();
  for (const std::string& dir : d.v2) {
    int64_t usage = sysfs::read_int(dir + "/memory.current", -1);
    if (usage < 0) continue;
    return usage - parse_stat_value(sysfs::read_text(dir + "/memory.stat"), "inactive_file");
  }
  for (const std::string& dir : d.v1_memory) {
    int64_t usage = sysfs::read_int(dir + "/memory.usage_in_bytes", -1);
    if (usage < 0) continue;
    return usage - parse_stat_value(sysfs::read_text(dir + "/memory.stat"), "total_inactive_file");
  }
  return 0;
}

}  // namespace hwt
