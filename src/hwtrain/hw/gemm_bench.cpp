// GEMM microbenchmark (see gemm_bench.h).
#include "hwtrain/hw/gemm_bench.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <chrono>

namespace hwt {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Operands {
  torch::Tensor a_NN, b_NN, c_NN;  // N: the square size
};

Operands make_operands(int n, torch::ScalarType dtype) {
  // A private generator: the benchmark must not move the global RNG a seeded run relies on.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(/*seed=*/1234);
  Operands o;
  o.a_NN = torch::randn({n, n}, gen).to(dtype);
  o.b_NN = torch::randn({n, n}, gen).to(dtype);
  o.c_NN = torch::empty({n, n}, torch::TensorOptions().dtype(dtype));
  return o;
}

// Seconds for one product after a warm-up (which also builds oneDNN's primitive); < 0 on failure.
double time_one(Operands& o) {
  try {
    torch::mm_out(o.c_NN, o.a_NN, o.b_NN);
    auto t0 = Clock::now();
    torch::mm_out(o.c_NN, o.a_NN, o.b_NN);
    return std::max(seconds_since(t0), 1e-7);
  } catch (const c10::Error&) {
    return -1;
  }
}

// Best GFLOP/s over rounds of about budget/4 each, for about `budget_s`.
double best_rate(Operands& o, int n, double one_s, double budget_s) {
  int per_round = std::max(1, static_cast<int>(budget_s / 4 / one_s));
  double flops = 2.0 * n * n * n * per_round;
  double best = 0;
  auto start = Clock::now();
  do {
    auto t0 = Clock::now();
    for (int i = 0; i < per_round; ++i) torch::mm_out(o.c_NN, o.a_NN, o.b_NN);
    best = std::max(best, flops / std::max(seconds_since(t0), 1e-9) / 1e9);
  } while (seconds_since(start) < budget_s);
  return best;
}

}  // namespace

GemmBenchResult run_gemm_bench(double budget_s) {
  torch::NoGradGuard no_grad;
  GemmBenchResult r;
  r.threads = at::get_num_threads();
  int n = 256;
  Operands f32 = make_operands(n, torch::kFloat32);
  Operands bf16 = make_operands(n, torch::kBFloat16);
  double t_f32 = time_one(f32), t_bf16 = time_one(bf16);
  if (t_f32 < 0) return r;
  // Grow while a product 8x larger (2n) still takes under an eighth of the budget.
  double slowest = std::max(t_f32, t_bf16);
  while (n < 1024 && slowest * 8 < budget_s / 8) {
    n *= 2;
    slowest *= 8;
  }
  if (n != 256) {
    f32 = make_operands(n, torch::kFloat32);
    bf16 = make_operands(n, torch::kBFloat16);
    t_f32 = time_one(f32);
    if (t_bf16 >= 0) t_bf16 = time_one(bf16);
  }
  r.n = n;
  if (t_f32 > 0) r.fp32_gflops = best_rate(f32, n, t_f32, budget_s);
  if (t_bf16 > 0) r.bf16_gflops = best_rate(bf16, n, t_bf16, budget_s);
  return r;
}

namespace {

bool agree(double a, double b) { return a <= 0 || b <= 0 ? a == b : std::abs(a - b) <= 0.15 * std::max(a, b); }

double plausible(double gflops, double peak) { return plausible_gemm_rate(gflops, peak) ? gflops : 0.0; }

}  // namespace

GemmBenchResult robust_gemm_bench(const std::function<GemmBenchResult()>& run_once, double fp32_peak_gflops,
                                  double bf16_peak_gflops, int* runs) {
  GemmBenchResult best, previous;
  int n = 0;
  while (n < 4) {
    GemmBenchResult r = run_once();
    r.fp32_gflops = plausible(r.fp32_gflops, fp32_peak_gflops);
    r.bf16_gflops = plausible(r.bf16_gflops, bf16_peak_gflops);
    ++n;
    best.n = r.n;
    best.threads = r.threads;
    best.fp32_gflops = std::max(best.fp32_gflops, r.fp32_gflops);
    best.bf16_gflops = std::max(best.bf16_gflops, r.bf16_gflops);
    // Two contended runs agreeing only say the neighbour is still there: wait for it instead.
    const bool contended = MathLibInfo::below_contended_share(r.fp32_gflops, fp32_peak_gflops) ||
                           (r.bf16_gflops > 0 && MathLibInfo::native_bf16_peak(bf16_peak_gflops, fp32_peak_gflops) &&
                            MathLibInfo::below_contended_share(r.bf16_gflops, bf16_peak_gflops));
    if (!contended && n > 1 && agree(r.fp32_gflops, previous.fp32_gflops) && agree(r.bf16_gflops, previous.bf16_gflops)) break;
    if (contended && n < 4) std::this_thread::sleep_for(std::chrono::milliseconds(100 * n));
    previous = r;
  }
  if (runs) *runs = n;
  return best;
}

}  // namespace hwt
