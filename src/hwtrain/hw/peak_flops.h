// What the CPU's ISA allows for GEMM: FLOP per cycle per core in fp32 and bf16, times the clock.
// Assumptions (the core's FMA datapath is not visible through cpuid, so it is inferred):
//   - AVX-512 on Intel: two 512-bit FMA units (Xeon Gold/Platinum; some client and Silver parts
//     have one, where the ratio reads low by 2x): 64 fp32 FLOP/cycle; AVX512_BF16 doubles it;
//     AMX-BF16: 1024 bf16 FLOP/cycle (one 16x32x16 tile product per 16 cycles).
//   - Zen 4 (AMD family 0x19 with AVX-512): two 256-bit FMA pipes, 512-bit ops double-pumped:
//     32 fp32 FLOP/cycle; AVX512_BF16 (VDPBF16PS) doubles it to 64.
//   - Zen 5 (family 0x1A): full 512-bit datapath: 64 fp32, 128 bf16.
//   - AVX2 + FMA (Haswell.., Zen 2/3): 32 fp32; Zen 1 (family 0x17, model < 0x30): 16.
//   - AVX without FMA: 16; SSE only: 8. Without native bf16, bf16 peak = fp32 peak.
//   - Frequency: the clock measured by cpu_info (a dependent-add loop, turbo included), else
//     cpufreq max, else /proc/cpuinfo MHz (under a hypervisor only the base clock), else 2.0 GHz.
//     All-core turbo under AVX-512 load can sit a little below the single-core clock measured.
// Non-x86 CPUs: unknown (0), and nothing is compared.
#pragma once
#include <string>

#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

struct PeakFlops {
  double fp32_flops_per_cycle = 0;
  double bf16_flops_per_cycle = 0;
  double ghz = 0;
  double fp32_gflops_per_core = 0;
  double bf16_gflops_per_core = 0;
  std::string assumption;  // one line, printed by doctor
};

PeakFlops estimate_peak_flops(const CpuInfo& cpu);

// Fills math->peak_* and the efficiencies for `threads` threads (capped at physical cores).
void apply_peak(const PeakFlops& peak, int threads, int num_physical_cores, MathLibInfo* math);

}  // namespace hwt
