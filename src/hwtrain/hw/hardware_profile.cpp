// detect_hardware(): composes the detectors of this folder. Each part is independent, and a part
// that fails (a torch call throwing on an odd build) leaves its defaults rather than failing the
// whole detection: a doctor that crashes is no doctor.
#include "hwtrain/hw/hardware_profile.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <optional>
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


// Fills p->math's GEMM rates: from the probe cache when a recent probe of this machine is there,
// else measured (and cached unless the reading was contended).
void probe_gemm(const DetectOptions& options, const PeakFlops& peak, HardwareProfile* p) {
  const int threads = std::max(1, std::min(at::get_num_threads(), std::max(1, p->cpu.num_physical_cores)));
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::filesystem::path file = gemm_probe_cache_file();
  const std::string key = gemm_probe_key(*p, at::get_num_threads());
  std::optional<CachedGemmProbe> probe = read_gemm_probe(file, key, now, options.gemm_cache_max_age_s);
  if (probe) {
    log_info("hardware: GEMM rates from a probe {:.0f} s ago ({}; hwtrain doctor measures afresh)",
             probe->age_seconds, file.string());
  } else {
    probe.emplace();
    probe->rates = robust_gemm_bench([&] { return run_gemm_bench(options.gemm_budget_s); },
                                     peak.fp32_gflops_per_core * threads, peak.bf16_gflops_per_core * threads);
    const std::string loadavg = sysfs::read_text("/proc/loadavg");  // "1.98 0.99 0.47 ..."
    if (!loadavg.empty()) probe->load_average = std::atof(loadavg.c_str());
  }
  MathLibInfo& m = p->math;
  m.gemm_measured = probe->rates.fp32_gflops > 0;
  m.gemm_threads = probe->rates.threads;
  m.gemm_size = probe->rates.n;
  m.fp32_gemm_gflops = probe->rates.fp32_gflops;
  m.bf16_gemm_gflops = probe->rates.bf16_gflops;
  m.gemm_load_average = probe->load_average;
  if (probe->age_seconds > 0 || !m.gemm_measured) return;
  MathLibInfo judged = m;  // contended is judged against the ISA peak at the probe's threads
  judged.peak_fp32_gflops = peak.fp32_gflops_per_core * threads;
  judged.peak_bf16_gflops = peak.bf16_gflops_per_core * threads;
  if (!judged.gemm_contended()) write_gemm_probe(file, key, *probe, now);
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
