// The pieces of one GPT-2 transformer block: LayerNorm with an optional bias (LibTorch's
// LayerNormOptions has no bias switch), the GELU MLP (4x wide), and the pre-LayerNorm Block
//   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x)).
// Module and parameter names follow GPT-2 (ln_1, attn.c_attn, mlp.c_fc, mlp.c_proj, ...).
//
// Shape letters: B batch, T sequence length, C n_embd.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "hwtrain/model/attention.h"
#include "hwtrain/model/decoder_block.h"

namespace hwt {

class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(int64_t n_embd, bool with_bias);
  torch::Tensor forward(const torch::Tensor& x_BTC);

  torch::Tensor weight;  // ones
  torch::Tensor bias;    // zeros; undefined when bias = false

 private:
  int64_t n_embd_;
};
TORCH_MODULE(LayerNorm);

class MLPImpl : public torch::nn::Module {
 public:
  // tanh_gelu: GELU's tanh approximation (GPT-2's "gelu_new") instead of the exact erf form.
  MLPImpl(int64_t n_embd, double dropout, bool bias, bool tanh_gelu = false);
  torch::Tensor forward(const torch::Tensor& x_BTC);
  // Tensor parallel: c_fc holds this rank's columns, c_proj the matching rows of its input.
  void set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm) { tp_ = std::move(comm); }

  torch::nn::Linear c_fc{nullptr};    // C -> 4C
  torch::nn::Linear c_proj{nullptr};  // 4C -> C, a residual branch

 private:
  torch::nn::Dropout dropout_{nullptr};
  bool tanh_gelu_ = false;
  std::shared_ptr<TensorParallelComm> tp_;
};
TORCH_MODULE(MLP);

struct BlockOptions {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  double dropout = 0.0;
  bool bias = true;
  bool tanh_gelu = false;
};

class BlockImpl : public DecoderBlockImpl {
 public:
  BlockImpl(const BlockOptions& options, std::shared_ptr<CausalMaskCache> mask_cache,
            AttentionKernel kernel = AttentionKernel::Sdpa);
  torch::Tensor forward(const torch::Tensor& x_BTC) override;
  void set_kernel(AttentionKernel kernel) override { attn->set_kernel(kernel); }
  torch::Tensor forward_cached(const torch::Tensor& x_BTC, LayerKV& kv, int64_t pos) override;
  void set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm) override {
    attn->set_tensor_parallel(comm);
    mlp->set_tensor_parallel(std::move(comm));
  }

  LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  LayerNorm ln_2{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

}  // namespace hwt
