// Causal attention as batched GEMMs with a hand-written backward: the CPU kernel that the planner
// prefers where the probabilities fit in memory. LibTorch's flash-attention CPU kernel runs its
// backward as many small per-block GEMMs (about 75 GFLOP/s in bf16 on the 2-core Zen 4 machine,
// hardly faster than fp32); here each step is one batched GEMM over all batch x heads, the softmax
// backward is one fused op, and query rows go in chunks that skip the keys above the diagonal:
// 1.5-1.6x faster per layer in bf16, 1.0-1.1x in fp32 (bench/model_attention_bench.cpp).
// The probabilities are kept for backward (in the compute dtype) rather than recomputed. No dropout.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace hwt {

constexpr int64_t kGemmAttentionChunkRows = 64;

// softmax(q k^T / sqrt(D) + causal mask) v for q, k, v of shape (B, H, T, D), any strides.
// Computes in q's dtype, or in the autocast dtype where autocast is on for q's device (as
// at::scaled_dot_product_attention would); `future_TT` is the bool mask of positions j > i.
// Query rows go chunk_rows at a time, each chunk against the keys up to its last row only.
torch::Tensor gemm_causal_attention(const torch::Tensor& q_BHTD, const torch::Tensor& k_BHTD,
                                    const torch::Tensor& v_BHTD, const torch::Tensor& future_TT,
                                    int64_t chunk_rows = kGemmAttentionChunkRows);

// Probabilities kept for backward per (batch, head): the sum over chunks of rows x keys seen
// (T * T * (n + 1) / 2n for n equal chunks). The memory model's term for this kernel.
int64_t gemm_attention_kept_probabilities(int64_t T, int64_t chunk_rows = kGemmAttentionChunkRows);

}  // namespace hwt
