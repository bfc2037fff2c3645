// detect_hardware(): composes the detectors of this folder. Each part is independent, and a part
// that fails (a torch call throwing on an odd build) leaves its defaults rather than failing the
// whole detection: a doctor that crashes is no doctor.
#include "hwtrain/hw/hardware_profile.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>

#include "hwtrain/hw/cpu_info.h"
#include "hwtrain/hw/env_info.h"
#include "hwtrain/hw/gemm_bench.h"
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
  if (options.run_gemm_benchmark) {
    guarded("gemm benchmark", [&] {
      const int threads = std::max(1, std::min(at::get_num_threads(), std::max(1, p.cpu.num_physical_cores)));
      GemmBenchResult r = robust_gemm_bench([&] { return run_gemm_bench(options.gemm_budget_s); },
                                            peak.fp32_gflops_per_core * threads, peak.bf16_gflops_per_core * threads);
      p.math.gemm_measured = r.fp32_gflops > 0;
      p.math.gemm_threads = r.threads;
      p.math.gemm_size = r.n;
      p.math.fp32_gemm_gflops = r.fp32_gflops;
      p.math.bf16_gemm_gflops = r.bf16_gflops;
      std::string loadavg = sysfs::read_text("/proc/loadavg");  // "1.98 0.99 0.47 ..."
      if (!loadavg.empty()) p.math.gemm_load_average = std::atof(loadavg.c_str());
    });
  }
  int threads = p.math.gemm_measured ? p.math.gemm_threads : p.env.torch_intra_op_threads;
  apply_peak(peak, threads, p.cpu.num_physical_cores, &p.math);
  return p;
}

}  // namespace hwt
