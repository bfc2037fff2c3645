// ISA peak FLOP estimate (assumptions in peak_flops.h).
#include "hwtrain/hw/peak_flops.h"

#include <algorithm>
#include <sstream>

namespace hwt {

PeakFlops estimate_peak_flops(const CpuInfo& cpu) {
  PeakFlops p;
  const CpuIsa& isa = cpu.isa;
  bool amd = cpu.vendor == "AuthenticAMD";
  bool intel = cpu.vendor == "GenuineIntel";
  std::string why;
  if (cpu.arch != "x86_64" || (!amd && !intel)) {
    p.assumption = "no peak estimate for " + (cpu.vendor.empty() ? cpu.arch : cpu.vendor) + " CPUs";
    return p;
  }
  if (isa.avx512f && amd) {
    bool zen5 = cpu.family >= 0x1a;
    p.fp32_flops_per_cycle = zen5 ? 64 : 32;
    why = zen5 ? "Zen 5: 2x512-bit FMA" : "Zen 4: 2x256-bit FMA pipes, AVX-512 double-pumped";
  } else if (isa.avx512f) {
    p.fp32_flops_per_cycle = 64;
    why = "Intel AVX-512: 2x512-bit FMA units assumed";
  } else if (isa.avx2 && isa.fma) {
    bool zen1 = amd && cpu.family == 0x17 && cpu.model < 0x30;
    p.fp32_flops_per_cycle = zen1 ? 16 : 32;
    why = zen1 ? "Zen 1: 2x128-bit FMA" : "AVX2: 2x256-bit FMA";
  } else if (isa.f16c || isa.fma) {
    p.fp32_flops_per_cycle = 16;
    why = "AVX without FMA: 256-bit add + mul";
  } else {
    p.fp32_flops_per_cycle = 8;
    why = "SSE: 128-bit add + mul";
  }
  p.bf16_flops_per_cycle = p.fp32_flops_per_cycle;
  if (isa.amx_bf16 && isa.amx_tile) {
    p.bf16_flops_per_cycle = 1024;
    why += "; AMX-BF16: 1024 bf16 FLOP/cycle";
  } else if (isa.avx512_bf16) {
    p.bf16_flops_per_cycle = 2 * p.fp32_flops_per_cycle;
    why += "; AVX512_BF16 dot products: 2x fp32";
  } else {
    why += "; no native bf16: bf16 peak = fp32";
  }
  p.ghz = cpu.frequency_mhz > 0 ? cpu.frequency_mhz / 1000.0 : 2.0;
  std::string clock = cpu.frequency_mhz > 0 ? cpu.frequency_source : "assumed, frequency unknown";
  p.fp32_gflops_per_core = p.fp32_flops_per_cycle * p.ghz;
  p.bf16_gflops_per_core = p.bf16_flops_per_cycle * p.ghz;
  std::ostringstream s;
  s.precision(3);
  s << p.fp32_flops_per_cycle << " fp32 / " << p.bf16_flops_per_cycle << " bf16 FLOP/cycle/core ("
    << why << ") at " << p.ghz << " GHz (" << clock << ")";
  p.assumption = s.str();
  return p;
}

void apply_peak(const PeakFlops& peak, int threads, int num_physical_cores, MathLibInfo* math) {
  // Hyperthreads share the FMA units, so more threads than cores add no peak.
  int cores = std::max(1, std::min(threads > 0 ? threads : num_physical_cores,
                                   std::max(1, num_physical_cores)));
  math->peak_fp32_gflops_per_core = peak.fp32_gflops_per_core;
  math->peak_bf16_gflops_per_core = peak.bf16_gflops_per_core;
  math->peak_fp32_gflops = peak.fp32_gflops_per_core * cores;
  math->peak_bf16_gflops = peak.bf16_gflops_per_core * cores;
  math->peak_assumption = peak.assumption;
  math->fp32_efficiency = (math->peak_fp32_gflops > 0 && math->fp32_gemm_gflops > 0)
                              ? math->fp32_gemm_gflops / math->peak_fp32_gflops
                              : 0;
  math->bf16_efficiency = (math->peak_bf16_gflops > 0 && math->bf16_gemm_gflops > 0)
                              ? math->bf16_gemm_gflops / math->peak_bf16_gflops
                              : 0;
}

}  // namespace hwt
