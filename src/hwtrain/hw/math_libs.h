// Which math libraries LibTorch runs on: the BLAS behind fp32 matmul (found by asking which loaded
// library provides sgemm_, then that library's own version, kernel path and threads), oneDNN's
// version, ATen's CPU dispatch level. No benchmark here (see gemm_bench.h).
#pragma once
#include <string>

#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

// Fills blas*, onednn_version and cpu_capability of `math`.
void detect_math_libs(MathLibInfo* math);

// "KEY=value" from the "Build settings:" part of at::show_config(); "" when absent.
std::string build_setting(const std::string& config, const std::string& key);

// The version token after `marker` ("v" in "MKL-DNN v3.10.2 (Git...)" -> "3.10.2"); "" if absent.
std::string version_after(const std::string& text, const std::string& marker);

// Names MKL's internal code-path id (mkl_serv_cpu_detect): 0 is its generic SSE2 path, which
// MKL takes on non-Intel CPUs; 7 is AVX-512 with VNNI/BF16 (observed on Zen 4 when MKL is told
// the CPU is Intel). The ids are not documented; this mapping follows MKL_VERBOSE's names.
std::string mkl_code_path_name(int id);

}  // namespace hwt
