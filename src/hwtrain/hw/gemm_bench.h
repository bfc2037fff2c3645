// A GEMM microbenchmark through LibTorch (so it measures whatever BLAS / oneDNN kernels LibTorch
// really dispatches to), fp32 and bf16 on the same square size at the current intra-op thread
// count. The size grows from 256 to at most 1024 while one product stays short, so a reference
// BLAS at 1 GFLOP/s still finishes quickly; the rate is the best of several timed rounds, which
// is robust to a neighbour process stealing a core for a moment.
#pragma once
#include <functional>

#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

struct GemmBenchResult {
  int n = 0;  // size of the n x n x n products
  int threads = 0;
  double fp32_gflops = 0;
  double bf16_gflops = 0;  // 0 when bf16 matmul is unsupported
};

// Runs for about 2 x budget_s plus warm-up (well under 1 s at the default 0.15 s).
GemmBenchResult run_gemm_bench(double budget_s);

// The probe the planner relies on, made robust to a neighbour (issue 19, defect 6: two ranks
// probing at once on 2 cores measured 5.6 GFLOP/s and planned fp32): `run_once` is repeated until
// two runs agree within 15% on both dtypes (at most 4 runs), and each dtype keeps its best rate.
// A rate above twice the ISA peak (`*_peak_gflops`, 0 = unknown) is a timing error and is dropped
// (0: not measured). A run under MathLibInfo::kContendedShare of either ISA peak is contended:
// it never counts as agreeing, and the next run waits a little longer (0.1, 0.2, 0.3 s) for the
// neighbour to finish. `runs` reports how many were made.
// Whether a measured rate can be real: at most twice the ISA peak (a peak of 0 is unknown: any).
inline bool plausible_gemm_rate(double gflops, double isa_peak_gflops) {
  return isa_peak_gflops <= 0 || gflops <= 2 * isa_peak_gflops;
}

GemmBenchResult robust_gemm_bench(const std::function<GemmBenchResult()>& run_once, double fp32_peak_gflops,
                                  double bf16_peak_gflops, int* runs = nullptr);

}  // namespace hwt
