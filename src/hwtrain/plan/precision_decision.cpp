// The precision decision: fp32, bf16 or fp16 autocast for the plan's device, from the ISA or the
// GPU's compute capability and the measured GEMM rates; a user's dtype wins (with a warning and a
// stated fallback where the hardware cannot run it). Then the bf16-weights choice that depends on it.
#include "hwtrain/plan/decisions.h"

#include <algorithm>

#include "hwtrain/core/strings.h"

namespace hwt {

namespace {

// Sets p.precision for a dtype the user chose; false when it falls back to the automatic choice.
bool user_precision(Plan& p, const PlanInputs& in, const GpuInfo* gpu, bool cpu_bf16_isa) {
  const PrecisionIntent& want = in.want.precision;
  if (!want.dtype) return false;
  const bool on_gpu = p.on_gpu();
  if (*want.dtype == Precision::Fp32) {
    p.precision = Precision::Fp32;
    p.decide("precision", "fp32", want.source + " set by user");
    return true;
  }
  if (*want.dtype == Precision::Fp16 && !on_gpu) {
    p.warnings.push_back("fp16 requested on CPU, which has no fast fp16 matmul here; using " +
                         std::string(cpu_bf16_isa ? "bf16" : "fp32") + " instead");
    return false;
  }
  if (*want.dtype == Precision::Bf16) {
    if (on_gpu && gpu && !gpu->bf16) {
      p.warnings.push_back("bf16 requested but " + gpu->name + " (compute capability " + std::to_string(gpu->cc_major) +
                           "." + std::to_string(gpu->cc_minor) + ") has no bf16 tensor cores; using fp16 with loss scaling");
      p.precision = Precision::Fp16;
      p.decide("precision", "fp16 autocast + dynamic loss scaling", "bf16 unsupported on this GPU (fallback)");
      return true;
    }
    if (!on_gpu && !cpu_bf16_isa) {
      p.warnings.push_back("bf16 requested on a CPU without AVX512_BF16 or AMX: it runs emulated and slower than fp32");
    }
    p.precision = Precision::Bf16;
    p.decide("precision", "bf16 autocast", want.source + " set by user");
    return true;
  }
  p.precision = Precision::Fp16;
  p.decide("precision", "fp16 autocast + dynamic loss scaling", want.source + " set by user");
  return true;
}

}  // namespace

void decide_precision(Plan& p, const PlanInputs& in) {
  const HardwareProfile& hw = in.hw;
  const GpuInfo* gpu = plan_gpu(p, in);
  const bool on_gpu = p.on_gpu();
  const auto& m = hw.math;
  const bool cpu_bf16_isa = hw.cpu.isa.avx512_bf16 || hw.cpu.isa.amx_bf16;
  // A contended probe measured its neighbours (issue 19, defect 6): go by the ISA as if unmeasured.
  const bool measured = m.gemm_measured && !m.gemm_contended();
  const bool cpu_bf16_faster = !measured || m.bf16_gemm_gflops > m.fp32_gemm_gflops;
  p.hardware_bf16 = on_gpu ? (gpu && gpu->bf16) : cpu_bf16_isa;
  p.hardware_fp16 = on_gpu && gpu && gpu->cc_major >= 7;  // no CPU here has a fast fp16 matmul path
  p.loss_scaling = in.want.loss_scaling;
  if (user_precision(p, in, gpu, cpu_bf16_isa)) return;
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
    if (m.gemm_contended()) {
      why += "; the GEMM probe ran on busy cores (" + format_number("%.1f", m.bf16_gemm_gflops) + " GFLOP/s bf16, " +
             format_number("%.1f", m.fp32_gemm_gflops) + " fp32), so its ratio was not used";
    } else if (measured) {
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

namespace hwt {

void decide_weights(Plan& p, const PlanInputs& in) {
  p.autocast = in.want.autocast;
  const AutocastSwitches defaults;
  if (p.autocast.cast_inputs != defaults.cast_inputs || p.autocast.cast_outputs != defaults.cast_outputs ||
      p.autocast.cache != defaults.cache) {
    auto on = [](bool b) { return b ? "true" : "false"; };
    p.decide("autocast", std::string("cast_inputs ") + on(p.autocast.cast_inputs) + ", cast_outputs " +
                             on(p.autocast.cast_outputs) + ", cache " + on(p.autocast.cache),
             p.precision == Precision::Fp32 ? "set by user; no effect in fp32 (no autocast)" : "set by user");
  }
  if (!in.want.pure_bf16_weights) return;
  if (p.precision == Precision::Bf16) {
    p.pure_bf16_weights = true;
    p.decide("weights", "bf16, no fp32 master copy", "optimization.pure_bf16_weights set by user");
  } else {
    p.warnings.push_back(std::string("optimization.pure_bf16_weights needs bf16 precision, but the plan is ") +
                         precision_name(p.precision) + "; keeping fp32 weights");
  }
}

}  // namespace hwt
