#include "hwtrain/plan/precision_decision.h"

#include <algorithm>

#include "hwtrain/core/strings.h"

namespace hwt {

void decide_precision(Plan& p, const HardwareProfile& hw, const RunConfig& c, const GpuInfo* gpu) {
  const auto& o = c.optimization;
  const bool on_gpu = p.device != "cpu";
  const auto& m = hw.math;
  const bool cpu_bf16_isa = hw.cpu.isa.avx512_bf16 || hw.cpu.isa.amx_bf16;
  const bool cpu_bf16_faster = !m.gemm_measured || m.bf16_gemm_gflops > m.fp32_gemm_gflops;
  p.hardware_bf16 = on_gpu ? (gpu && gpu->bf16) : cpu_bf16_isa;
  p.hardware_fp16 = on_gpu && gpu && gpu->cc_major >= 7;  // no CPU here has a fast fp16 matmul path

  if (!o.enable_mixed_precision) {
    p.precision = Precision::Fp32;
    p.decide("precision", "fp32", "optimization.enable_mixed_precision = false set by user");
    return;
  }
  std::string want = o.mixed_precision_dtype;
  if (want == "fp32") {
    p.precision = Precision::Fp32;
    p.decide("precision", "fp32", "optimization.mixed_precision_dtype = fp32 set by user");
    return;
  }
  if (want == "fp16" && !on_gpu) {
    p.warnings.push_back("fp16 requested on CPU, which has no fast fp16 matmul here; using " +
                         std::string(cpu_bf16_isa ? "bf16" : "fp32") + " instead");
    want = "auto";
  }
  if (want == "bf16") {
    if (on_gpu && gpu && !gpu->bf16) {
      p.warnings.push_back("bf16 requested but " + gpu->name + " (compute capability " + std::to_string(gpu->cc_major) +
                           "." + std::to_string(gpu->cc_minor) + ") has no bf16 tensor cores; using fp16 with loss scaling");
      p.precision = Precision::Fp16;
      p.decide("precision", "fp16 autocast + dynamic loss scaling", "bf16 unsupported on this GPU (fallback)");
      return;
    }
    if (!on_gpu && !cpu_bf16_isa) {
      p.warnings.push_back("bf16 requested on a CPU without AVX512_BF16 or AMX: it runs emulated and slower than fp32");
    }
    p.precision = Precision::Bf16;
    p.decide("precision", "bf16 autocast", "optimization.mixed_precision_dtype = bf16 set by user");
    return;
  }
  if (want == "fp16") {
    p.precision = Precision::Fp16;
    p.decide("precision", "fp16 autocast + dynamic loss scaling", "optimization.mixed_precision_dtype = fp16 set by user");
    return;
  }
  // auto
  if (on_gpu && gpu) {
    const std::string cc = std::to_string(gpu->cc_major) + "." + std::to_string(gpu->cc_minor);
    if (gpu->cc_major >= 8) {
      p.precision = Precision::Bf16;
      p.decide("precision", "bf16 autocast", "compute capability " + cc + " has bf16 tensor cores");
    } else if (gpu->cc_major == 7) {
      p.precision = Precision::Fp16;
      p.decide("precision", "fp16 autocast + dynamic loss scaling", "compute capability " + cc + ": fp16 tensor cores, no bf16");
    } else {
      p.precision = Precision::Fp32;
      p.decide("precision", "fp32", "compute capability " + cc + " has no tensor cores");
    }
    return;
  }
  if (cpu_bf16_isa && cpu_bf16_faster) {
    p.precision = Precision::Bf16;
    std::string why = std::string(hw.cpu.isa.amx_bf16 ? "AMX-BF16" : "AVX512_BF16") + " present";
    if (m.gemm_measured) {
      why += "; bf16 GEMM " + format_number("%.1f", m.bf16_gemm_gflops) + " vs fp32 " + format_number("%.1f", m.fp32_gemm_gflops) + " GFLOP/s (" +
             format_number("%.1f", m.bf16_gemm_gflops / std::max(1e-9, m.fp32_gemm_gflops)) + "x)";
    }
    p.decide("precision", "bf16 autocast", why);
  } else {
    p.precision = Precision::Fp32;
    p.decide("precision", "fp32",
             cpu_bf16_isa ? "bf16 GEMM measured no faster than fp32 (" + format_number("%.1f", m.bf16_gemm_gflops) + " vs " +
                                format_number("%.1f", m.fp32_gemm_gflops) + " GFLOP/s)"
                          : "CPU lacks AVX512_BF16 and AMX: bf16 would be emulated and slower");
  }
}

}  // namespace hwt
