// Causal multi-head self-attention for the GPT blocks, with three kernels: LibTorch's fused
// scaled-dot-product attention (flash / memory-efficient on CPU and GPU), batched-GEMM attention
// with a hand-written backward (model/gemm_attention.h, faster on CPU where its probabilities fit)
// and the reference math path (softmax(q k^T / sqrt(D)) v with a causal mask), which the other two
// are tested against. The causal masks live in a CausalMaskCache shared by all blocks of a model: one mask per
// (sequence length, device), built on first use. Choosing the kernel ("auto") is the planner's job.
//
// Shape letters: B batch, T sequence length, C n_embd, H heads, D head size (C / H).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "hwtrain/model/attention_kernel.h"
#include "hwtrain/model/kv_cache.h"
#include "hwtrain/model/tensor_parallel.h"

namespace hwt {

// Causal masks for the math and GEMM paths: future_TT[i][j] is true where j > i (positions to hide).
// Thread-safe; shared by the blocks of one model so each (T, device) is built once.
class CausalMaskCache {
 public:
  torch::Tensor future_mask(int64_t T, const torch::Device& device);
  void clear();
  int64_t size() const;        // masks held now
  int64_t num_builds() const;  // masks built since construction (a rebuild after clear() counts)

 private:
  using Key = std::tuple<int64_t, int, int>;  // (T, device type, device index)
  mutable std::mutex mutex_;
  std::map<Key, torch::Tensor> masks_;
  int64_t num_builds_ = 0;
};

struct CausalSelfAttentionOptions {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  double dropout = 0.0;
  bool bias = true;
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(const CausalSelfAttentionOptions& options,
                          std::shared_ptr<CausalMaskCache> mask_cache,
                          AttentionKernel kernel = AttentionKernel::Sdpa);

  torch::Tensor forward(const torch::Tensor& x_BTC);
  // The new positions of x after those in `kv` (eval): their keys and values are appended.
  torch::Tensor forward_cached(const torch::Tensor& x_BTC, LayerKV& kv);
  // Tensor parallel (model/tensor_parallel.h): c_attn holds this rank's heads (column-parallel),
  // c_proj their input columns (row-parallel).
  void set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm) { tp_ = std::move(comm); }
  // The heads' causal attention with the chosen kernel, without the projections around it:
  // q, k, v of shape (B, H, T, D), any strides -> (B, H, T, D).
  torch::Tensor attend(const torch::Tensor& q_BHTD, const torch::Tensor& k_BHTD, const torch::Tensor& v_BHTD);

  void set_kernel(AttentionKernel kernel) { kernel_ = kernel; }
  AttentionKernel kernel() const { return kernel_; }

  // Public so that GPT can find them for the scaled residual init; names follow GPT-2's.
  torch::nn::Linear c_attn{nullptr};  // fused q, k, v projection: C -> 3C
  torch::nn::Linear c_proj{nullptr};  // output projection, a residual branch: C -> C

 private:
  torch::Tensor math_attention(const torch::Tensor& q_BHTD, const torch::Tensor& k_BHTD,
                               const torch::Tensor& v_BHTD);

  CausalSelfAttentionOptions options_;
  std::shared_ptr<TensorParallelComm> tp_;
  std::shared_ptr<CausalMaskCache> mask_cache_;
  AttentionKernel kernel_;
  torch::nn::Dropout attn_dropout_{nullptr};
  torch::nn::Dropout resid_dropout_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

}  // namespace hwt
