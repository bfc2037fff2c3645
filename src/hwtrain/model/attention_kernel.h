// AttentionKernel: which implementation of causal self-attention a model runs, as the plan names
// it. Header-only enum (no LibTorch) so that the plan can carry it; model/attention.h implements them.
#pragma once
#include <string>

#include "hwtrain/core/enum_names.h"

namespace hwt {

enum class AttentionKernel {
  Sdpa,  // at::scaled_dot_product_attention(..., is_causal=true): fused kernels where available
  Math,  // the reference: explicit scores, cached causal mask, softmax, dropout, @ v
  Gemm,  // gemm_causal_attention: batched GEMMs, probabilities kept for backward, no dropout
};

template <>
struct EnumNames<AttentionKernel> {
  static constexpr std::array<std::pair<AttentionKernel, const char*>, 3> table{{
      {AttentionKernel::Sdpa, "sdpa"},
      {AttentionKernel::Gemm, "gemm"},
      {AttentionKernel::Math, "math"}}};
};

const char* to_string(AttentionKernel kernel);
// "sdpa" | "gemm" | "math"; anything else (including "auto", which the planner resolves) is a ConfigError.
AttentionKernel parse_attention_kernel(const std::string& name);

}  // namespace hwt
