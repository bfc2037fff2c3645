// The pieces of one Llama-family decoder layer (Llama 2/3, Mistral, Qwen2), as Hugging Face's
// LlamaDecoderLayer computes them:
//   x = x + o_proj(attention(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1))),  n1 = input_layernorm(x)
//   x = x + down_proj(silu(gate_proj(n2)) * up_proj(n2)),                       n2 = post_attention_layernorm(x)
// RMSNorm in fp32, rotary embeddings in the "rotate half" layout with Llama 3's frequency scaling,
// grouped-query attention (n_kv_head key/value heads), no biases except Qwen2's on q/k/v. Module
// and parameter names are Hugging Face's without the "model." prefix, so that its checkpoints map
// one to one.
//
// Shape letters: B batch, T sequence length, C n_embd, H query heads, K key/value heads, D head
// size, I intermediate (SwiGLU) width.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "hwtrain/model/attention.h"
#include "hwtrain/model/decoder_block.h"
#include "hwtrain/model/model_config.h"

namespace hwt {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t n_embd, double eps);
  torch::Tensor forward(const torch::Tensor& x_BTC);
  torch::Tensor weight;  // ones

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

// The rotary tables cos, sin (T, D) in fp32 for positions 0..T-1, built once per (T, device) and
// shared by the layers of a model.
class RotaryCache {
 public:
  explicit RotaryCache(const ModelConfig& cfg);
  std::pair<torch::Tensor, torch::Tensor> cos_sin(int64_t T, const torch::Device& device);
  // The inverse frequencies (D / 2), Llama 3 scaling applied: what Hugging Face computes.
  const torch::Tensor& inv_freq() const { return inv_freq_; }

 private:
  torch::Tensor inv_freq_;
  std::mutex mutex_;
  std::map<std::tuple<int64_t, int, int>, std::pair<torch::Tensor, torch::Tensor>> tables_;
};

// x (B, heads, T, D) rotated by the tables (T, D): x cos + rotate_half(x) sin, in x's dtype.
torch::Tensor apply_rotary(const torch::Tensor& x_BHTD, const torch::Tensor& cos_TD, const torch::Tensor& sin_TD);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  LlamaAttentionImpl(const ModelConfig& cfg, std::shared_ptr<RotaryCache> rotary,
                     std::shared_ptr<CausalMaskCache> mask_cache, AttentionKernel kernel);
  torch::Tensor forward(const torch::Tensor& x_BTC);
  // Positions pos.. of x after those in `kv` (eval): rotated by their positions, appended to kv.
  torch::Tensor forward_cached(const torch::Tensor& x_BTC, LayerKV& kv, int64_t pos);
  void set_kernel(AttentionKernel kernel) { kernel_ = kernel; }
  // Tensor parallel: q/k/v_proj hold this rank's query and key/value heads, o_proj their input columns.
  void set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm);

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  torch::Tensor attend(const torch::Tensor& q_BHTD, const torch::Tensor& k_BKTD, const torch::Tensor& v_BKTD);

  int64_t n_head_, n_kv_head_, head_dim_, block_size_;
  double dropout_;
  std::shared_ptr<RotaryCache> rotary_;
  std::shared_ptr<CausalMaskCache> mask_cache_;
  AttentionKernel kernel_;
  torch::nn::Dropout resid_dropout_{nullptr};
  std::shared_ptr<TensorParallelComm> tp_;
};
TORCH_MODULE(LlamaAttention);

class SwiGLUImpl : public torch::nn::Module {
 public:
  SwiGLUImpl(int64_t n_embd, int64_t intermediate, double dropout);
  torch::Tensor forward(const torch::Tensor& x_BTC);
  void set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm) { tp_ = std::move(comm); }
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  torch::nn::Dropout dropout_{nullptr};
  std::shared_ptr<TensorParallelComm> tp_;
};
TORCH_MODULE(SwiGLU);

class LlamaBlockImpl : public DecoderBlockImpl {
 public:
  LlamaBlockImpl(const ModelConfig& cfg, std::shared_ptr<RotaryCache> rotary,
                 std::shared_ptr<CausalMaskCache> mask_cache, AttentionKernel kernel);
  torch::Tensor forward(const torch::Tensor& x_BTC) override;
  void set_kernel(AttentionKernel kernel) override { self_attn->set_kernel(kernel); }
  torch::Tensor forward_cached(const torch::Tensor& x_BTC, LayerKV& kv, int64_t pos) override;
  void set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm) override {
    self_attn->set_tensor_parallel(comm);
    mlp->set_tensor_parallel(std::move(comm));
  }

  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  LlamaAttention self_attn{nullptr};
  SwiGLU mlp{nullptr};
};

}  // namespace hwt
