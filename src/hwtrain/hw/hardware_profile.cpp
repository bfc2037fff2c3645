// detect_hardware(): composes the detectors of this folder. Each part is independent, and a part
// that fails (a torch call throwing on an odd build) leaves its defaults rather than failing the
// whole detection: a doctor that crashes is no doctor.
#include "hwtrain/hw/hardware_profile.h"

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <cstdlib>

#include "hwtrain/hw/cpu_info.h"
#include "hwtrain/hw/env_info.h"
#include "hwtrain/hw/gemm_bench.h"
#include "hwtrain/hw/gemm_probe_cache.h"
#include "hwtrain/hw/gpu_info.h"
#include "hwtrain/hw/math_libs.h"
#include "hwtrain/hw/memory_info.h"
#include "hwtrain/hw/peak_flops.h"
#include "hwtrain/hw/software_info.h"
#include "hwtrain/hw/sysfs.h"
#include "hwtrain/obs/log.h"

namespace hwt {
namespace {

template <typename Fn>
void guarded(const char* part, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    warn_once(std::string("hw.detect.") + part,
              std::string("hardware detection: ") + part + " failed: " + e.what());
  }
}

// A reading taken while the machine was busy (load average above its logical threads) stands for
// this long only; a quiet one for DetectOptions::gemm_cache_max_age_s.
constexpr double kBusyProbeSeconds = 300;

// The probe's rates as MathLibInfo judges them, against the ISA peak at `threads`.
MathLibInfo judged(const CachedGemmProbe& c, const PeakFlops& peak, int threads) {
  MathLibInfo m;
  m.gemm_measured = c.rates.fp32_gflops > 0;
  m.fp32_gemm_gflops = c.rates.fp32_gflops;
  m.bf16_gemm_gflops = c.rates.bf16_gflops;
  m.peak_fp32_gflops = peak.fp32_gflops_per_core * threads;
  m.peak_bf16_gflops = peak.bf16_gflops_per_core * threads;
  return m;
}

// Whether a probe may be kept or reused: measured, not contended, under twice the ISA peak (as
// robust_gemm_bench drops a timing error), at this process's threads, and a busy one still recent.
bool trustworthy(const CachedGemmProbe& c, const PeakFlops& peak, int threads, int logical_threads) {
  const MathLibInfo m = judged(c, peak, threads);
  return m.gemm_measured && !m.gemm_contended() && plausible_gemm_rate(m.fp32_gemm_gflops, m.peak_fp32_gflops) &&
         plausible_gemm_rate(m.bf16_gemm_gflops, m.peak_bf16_gflops) && c.rates.threads == at::get_num_threads() &&
         (c.load_average <= logical_threads || c.age_seconds <= kBusyProbeSeconds);
}

// An exclusive lock on `path` (created if missing) for this object's life; none if it cannot be had
// within `wait_s` (a holder stopped with Ctrl-Z or SIGSTOP must not stall every later start).
class ProbeLock {
 public:
  ProbeLock(const std::filesystem::path& path, double wait_s)
      : fd_(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0644)) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    while (fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) {
        if (errno == EWOULDBLOCK) {
          log_warn("hardware: {} was held for over {:g} s (a stopped process?); measuring without it", path.string(),
                   wait_s);
        }
        release();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ProbeLock() { release(); }
  ProbeLock(const ProbeLock&) = delete;
  ProbeLock& operator=(const ProbeLock&) = delete;

 private:
  void release() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
    fd_ = -1;
  }
  int fd_;
};

// The probe to use: a trustworthy cached one, else measured under the cache's lock (processes
// started together measure once, not each other), and cached when trustworthy.
CachedGemmProbe cached_or_measured(const DetectOptions& options, const PeakFlops& peak, const HardwareProfile& p) {
  const int threads = std::max(1, std::min(at::get_num_threads(), std::max(1, p.cpu.num_physical_cores)));
  const int logical = std::max(1, p.cpu.num_logical_threads);
  const auto now = [] {  // read again after the lock: the holder's measured_at may be later than our start
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  const std::filesystem::path file = gemm_probe_cache_file();  // the doctor skips reading it, not writing
  const std::string key = gemm_probe_key(p, at::get_num_threads());
  const auto cached = [&]() -> std::optional<CachedGemmProbe> {
    if (options.gemm_cache_max_age_s <= 0) return std::nullopt;
    auto c = read_gemm_probe(file, key, now(), options.gemm_cache_max_age_s);
    if (c && trustworthy(*c, peak, threads, logical)) return c;
    return std::nullopt;
  };
  if (auto c = cached()) return *c;
  std::optional<ProbeLock> lock;  // none without a cache file: nothing to share
  if (!file.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    lock.emplace(file.string() + ".lock", options.gemm_lock_wait_s);
  }
  if (auto c = cached()) return *c;  // measured by the process that held the lock
  CachedGemmProbe probe;
  probe.rates = robust_gemm_bench([&] { return run_gemm_bench(options.gemm_budget_s); },
                                  peak.fp32_gflops_per_core * threads, peak.bf16_gflops_per_core * threads);
  const std::string loadavg = sysfs::read_text("/proc/loadavg");  // "1.98 0.99 0.47 ..."
  if (!loadavg.empty()) probe.load_average = std::atof(loadavg.c_str());
  if (!file.empty() && trustworthy(probe, peak, threads, logical)) write_gemm_probe(file, key, probe, now());
  return probe;
}

// Fills p->math's GEMM rates from cached_or_measured.
void probe_gemm(const DetectOptions& options, const PeakFlops& peak, HardwareProfile* p) {
  const CachedGemmProbe probe = cached_or_measured(options, peak, *p);
  if (probe.age_seconds > 0) {
    log_info("hardware: GEMM rates from a probe {:.0f} s ago ({}; hwtrain doctor measures afresh)",
             probe.age_seconds, gemm_probe_cache_file().string());
  }
  MathLibInfo& m = p->math;
  m.gemm_measured = probe.rates.fp32_gflops > 0;
  m.gemm_threads = probe.rates.threads;
  m.gemm_size = probe.rates.n;
  m.fp32_gemm_gflops = probe.rates.fp32_gflops;
  m.bf16_gemm_gflops = probe.rates.bf16_gflops;
  m.gemm_load_average = probe.load_average;
}

}  // namespace

HardwareProfile detect_hardware(const DetectOptions& options) {
  HardwareProfile p;
  p.source = "detected";
  guarded("cpu", [&] { p.cpu = detect_cpu(); });
  guarded("memory", [&] { p.memory = detect_memory(); });
  guarded("math libraries", [&] { detect_math_libs(&p.math); });
  guarded("environment", [&] { p.env = detect_env(); });
  guarded("software", [&] { p.software = detect_software(); });
  guarded("gpus", [&] {
    GpuDetection g = detect_gpus();
    p.gpus = g.gpus;
    p.software.gpu_driver_version = g.driver_version;
    p.software.cuda_driver_version = g.cuda_driver_version;
  });
  const PeakFlops peak = estimate_peak_flops(p.cpu);
  if (options.run_gemm_benchmark) guarded("gemm benchmark", [&] { probe_gemm(options, peak, &p); });
  int threads = p.math.gemm_measured ? p.math.gemm_threads : p.env.torch_intra_op_threads;
  apply_peak(peak, threads, p.cpu.num_physical_cores, &p.math);
  return p;
}

}  // namespace hwt
