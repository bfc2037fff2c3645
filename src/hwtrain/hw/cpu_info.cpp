// CPU detection with cpuid/xgetbv on x86, /proc and /sys elsewhere (see cpu_info.h).
#include "hwtrain/hw/cpu_info.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "hwtrain/hw/cgroup.h"
#include "hwtrain/hw/sysfs.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define HWTRAIN_X86 1
#endif

namespace hwt {
namespace {

#ifdef HWTRAIN_X86
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}

bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }

uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

// Intel leaf 0x16: base frequency in MHz (absent on AMD and on most VMs); 0 when absent.
double cpuid_base_mhz() {
  if (cpuid(0).a < 0x16) return 0;
  return cpuid(0x16).a & 0xffff;
}

void detect_x86(CpuInfo* cpu) {
  Regs v = cpuid(0);
  unsigned max_leaf = v.a;
  char vendor[13] = {};
  std::memcpy(vendor, &v.b, 4);
  std::memcpy(vendor + 4, &v.d, 4);
  std::memcpy(vendor + 8, &v.c, 4);
  cpu->vendor = vendor;

  Regs l1 = cpuid(1);
  int base_family = (l1.a >> 8) & 0xf, base_model = (l1.a >> 4) & 0xf;
  cpu->family = base_family == 0xf ? base_family + ((l1.a >> 20) & 0xff) : base_family;
  cpu->model = (base_family == 0x6 || base_family == 0xf) ? base_model + (((l1.a >> 16) & 0xf) << 4)
                                                          : base_model;

  unsigned max_ext = cpuid(0x80000000).a;
  if (max_ext >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    cpu->model_name = sysfs::trim(brand);
  }

  // The OS must save a register file before its instructions are usable (XCR0 bits).
  bool osxsave = bit(l1.c, 27);
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  bool os_avx = (xcr0 & 0x6) == 0x6;             // SSE + AVX state
  bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  bool os_amx = (xcr0 & 0x60000) == 0x60000;      // XTILECFG + XTILEDATA
  cpu->os_avx512_state = os_avx512;
  cpu->os_amx_state = os_amx;

  Regs l7 = max_leaf >= 7 ? cpuid(7, 0) : Regs{};
  Regs l7s1 = (max_leaf >= 7 && l7.a >= 1) ? cpuid(7, 1) : Regs{};
  CpuIsa& isa = cpu->isa;
  isa.sse4_2 = bit(l1.c, 20);
  isa.fma = os_avx && bit(l1.c, 12);
  isa.f16c = os_avx && bit(l1.c, 29);
  isa.avx2 = os_avx && bit(l7.b, 5);
  isa.avx512f = os_avx512 && bit(l7.b, 16);
  isa.avx512bw = os_avx512 && bit(l7.b, 30);
  isa.avx512vl = os_avx512 && bit(l7.b, 31);
  isa.avx512_vnni = os_avx512 && bit(l7.c, 11);
  isa.avx512_bf16 = os_avx512 && bit(l7s1.a, 5);
  isa.amx_bf16 = os_amx && bit(l7.d, 22);
  isa.amx_tile = os_amx && bit(l7.d, 24);

  // Cache sizes when /sys did not give them: leaf 0x80000006 (L2 KiB in ECX[31:16]; on AMD the
  // L3 in 512 KiB units in EDX[31:18]).
  if (max_ext >= 0x80000006) {
    Regs c = cpuid(0x80000006);
    if (cpu->l2_cache_bytes == 0) cpu->l2_cache_bytes = int64_t{(c.c >> 16) & 0xffff} * 1024;
    if (cpu->l3_cache_bytes == 0 && cpu->vendor == "AuthenticAMD")
      cpu->l3_cache_bytes = int64_t{(c.d >> 18) & 0x3fff} * 512 * 1024;
  }
}

// The clock the core actually runs at (turbo included; under a hypervisor /proc/cpuinfo shows
// only the base clock): a chain of dependent integer adds retires one add per cycle on every
// x86 core since the Pentium Pro. Best of several ~1 ms runs, so a run cut by preemption does
// not count. 0 when not measurable.
double measure_clock_mhz() {
  constexpr long kIterations = 250000;  // x 8 adds: 2M cycles, ~0.6 ms at 3.5 GHz
  double best = 0;
  for (int rep = 0; rep < 10; ++rep) {
    long n = kIterations;
    unsigned long x = 0;
    auto t0 = std::chrono::steady_clock::now();
    __asm__ volatile(
        "1:\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "dec %1\n\t"
        "jnz 1b"
        : "+r"(x), "+r"(n)
        :
        : "cc");
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, 8.0 * kIterations / s / 1e6);
  }
  return (best > 200 && best < 8000) ? best : 0;
}
#endif

std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < (n > 0 ? n : 1); ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

void detect_caches(CpuInfo* cpu) {
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int i = 0; i < 8; ++i) {
    std::string dir = base + std::to_string(i);
    int64_t level = sysfs::read_int(dir + "/level", -1);
    if (level < 0) break;
    std::string type = sysfs::trim(sysfs::read_text(dir + "/type"));
    if (type == "Instruction") continue;
    int64_t size = sysfs::parse_size_suffix(sysfs::read_text(dir + "/size"));
    if (level == 2) cpu->l2_cache_bytes = size;
    if (level == 3) cpu->l3_cache_bytes = size;
  }
}

void detect_frequency(CpuInfo* cpu, const std::string& cpuinfo) {
  int64_t max_khz = sysfs::read_int("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", 0);
  if (max_khz > 0) {
    cpu->frequency_mhz = static_cast<double>(max_khz) / 1000.0;
    cpu->frequency_source = "cpufreq max";
    return;
  }
  std::string mhz = sysfs::colon_value(cpuinfo, "cpu MHz");
  if (!mhz.empty()) {
    try {
      cpu->frequency_mhz = std::stod(mhz);
      cpu->frequency_source = "/proc/cpuinfo";
      return;
    } catch (const std::exception&) {
    }
  }
  // Intel brand strings end with "@ 2.60GHz".
  size_t at = cpu->model_name.find("@ ");
  if (at != std::string::npos) {
    try {
      cpu->frequency_mhz = std::stod(cpu->model_name.substr(at + 2)) * 1000.0;
      cpu->frequency_source = "brand string";
    } catch (const std::exception&) {
    }
  }
}

}  // namespace

int count_physical_cores(const std::vector<int>& cpus) {
  std::set<std::pair<int64_t, int64_t>> cores;
  for (int c : cpus) {
    std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    int64_t core = sysfs::read_int(dir + "core_id", -1);
    int64_t pkg = sysfs::read_int(dir + "physical_package_id", 0);
    if (core < 0) return static_cast<int>(cpus.size());
    cores.insert({pkg, core});
  }
  return cores.empty() ? static_cast<int>(cpus.size()) : static_cast<int>(cores.size());
}

void apply_cpu_quota(double quota_cpus, int* num_physical_cores, int* num_logical_threads) {
  if (quota_cpus <= 0) return;
  int cap = std::max(1, static_cast<int>(std::ceil(quota_cpus - 1e-9)));
  *num_physical_cores = std::min(*num_physical_cores, cap);
  *num_logical_threads = std::min(*num_logical_threads, cap);
}

CpuInfo detect_cpu() {
  CpuInfo cpu;
#if defined(__x86_64__)
  cpu.arch = "x86_64";
#elif defined(__aarch64__)
  cpu.arch = "aarch64";
#else
  cpu.arch = "unknown";
#endif
  std::string cpuinfo = sysfs::read_text("/proc/cpuinfo");
  std::vector<int> cpus = affinity_cpus();
  cpu.num_logical_threads = static_cast<int>(cpus.size());
  cpu.num_physical_cores = count_physical_cores(cpus);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu.num_online_threads = online > 0 ? static_cast<int>(online) : cpu.num_logical_threads;
  cpu.cgroup_cpu_quota = cgroup_cpu_quota();
  apply_cpu_quota(cpu.cgroup_cpu_quota, &cpu.num_physical_cores, &cpu.num_logical_threads);

  detect_caches(&cpu);
#ifdef HWTRAIN_X86
  detect_x86(&cpu);
#endif
  if (cpu.model_name.empty()) cpu.model_name = sysfs::colon_value(cpuinfo, "model name");
#ifdef HWTRAIN_X86
  cpu.frequency_mhz = measure_clock_mhz();
  if (cpu.frequency_mhz > 0) cpu.frequency_source = "measured";
#endif
  if (cpu.frequency_mhz == 0) detect_frequency(&cpu, cpuinfo);
#ifdef HWTRAIN_X86
  if (cpu.frequency_mhz == 0) {
    cpu.frequency_mhz = cpuid_base_mhz();
    if (cpu.frequency_mhz > 0) cpu.frequency_source = "cpuid 0x16";
  }
#endif
  return cpu;
}

}  // namespace hwt
