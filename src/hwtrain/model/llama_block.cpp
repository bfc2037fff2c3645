// One Llama-family decoder layer: RMSNorm, rotary embeddings, grouped-query attention, SwiGLU.
#include "hwtrain/model/llama_block.h"

#include <cmath>
#include <limits>

#include "hwtrain/model/column_parallel.h"
#include "hwtrain/model/gemm_attention.h"
#include "hwtrain/model/linear.h"
#include "hwtrain/model/swiglu_product.h"

namespace hwt {

RMSNormImpl::RMSNormImpl(int64_t n_embd, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({n_embd}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x_BTC) {
  // On CUDA with fp32 input and weight (the fp32 residual stream under autocast), one fused kernel
  // forward and one backward (at::rms_norm -> _fused_rms_norm) instead of eight passes over x: the
  // same arithmetic with the mean summed in another order (not bit-identical to the below). 16-bit
  // weights keep the below, whose two roundings Hugging Face's norm has (the fused kernel rounds once).
  if (x_BTC.is_cuda() && x_BTC.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat) {
    return at::rms_norm(x_BTC, {x_BTC.size(-1)}, weight, eps_);
  }
  // As Hugging Face's LlamaRMSNorm: normalize in fp32, cast back, then scale.
  auto x32 = x_BTC.to(torch::kFloat);
  x32 = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * x32.to(x_BTC.scalar_type());
}

namespace {

// Hugging Face's inverse frequencies, with Llama 3's scaling (rope_type "llama3") where asked.
torch::Tensor rope_inverse_frequencies(const ModelConfig& cfg) {
  const int64_t D = cfg.head_dim();
  auto inv = 1.0 / torch::pow(cfg.rope_theta, torch::arange(0, D, 2, torch::kLong).to(torch::kFloat) / double(D));
  if (cfg.rope_scaling != RopeScaling::kLlama3) return inv;
  const double factor = cfg.rope_scaling_factor, low = cfg.rope_low_freq_factor, high = cfg.rope_high_freq_factor;
  const double old_len = static_cast<double>(cfg.rope_original_max_positions);
  const double low_wavelen = old_len / low, high_wavelen = old_len / high;
  auto wavelen = 2.0 * M_PI / inv;
  auto scaled = torch::where(wavelen > low_wavelen, inv / factor, inv);
  auto smooth = (old_len / wavelen - low) / (high - low);
  auto smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
  auto medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return torch::where(medium, smoothed, scaled);
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

RotaryCache::RotaryCache(const ModelConfig& cfg) : inv_freq_(rope_inverse_frequencies(cfg)) {}

std::pair<torch::Tensor, torch::Tensor> RotaryCache::cos_sin(int64_t T, const torch::Device& device) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = std::make_tuple(T, static_cast<int>(device.type()), static_cast<int>(device.index()));
  auto it = tables_.find(key);
  if (it != tables_.end()) return it->second;
  torch::NoGradGuard no_grad;
  auto freqs_TD2 = torch::outer(torch::arange(T, torch::kFloat), inv_freq_);
  auto emb_TD = torch::cat({freqs_TD2, freqs_TD2}, -1);
  auto tables = std::make_pair(emb_TD.cos().to(device), emb_TD.sin().to(device));
  tables_.emplace(key, tables);
  return tables;
}

torch::Tensor apply_rotary(const torch::Tensor& x_BHTD, const torch::Tensor& cos_TD, const torch::Tensor& sin_TD) {
  const auto dtype = x_BHTD.scalar_type();
  return x_BHTD * cos_TD.to(dtype) + rotate_half(x_BHTD) * sin_TD.to(dtype);
}

LlamaAttentionImpl::LlamaAttentionImpl(const ModelConfig& cfg, std::shared_ptr<RotaryCache> rotary,
                                       std::shared_ptr<CausalMaskCache> mask_cache, AttentionKernel kernel)
    : n_head_(cfg.n_head),
      n_kv_head_(cfg.kv_heads()),
      head_dim_(cfg.head_dim()),
      block_size_(cfg.block_size),
      dropout_(cfg.dropout),
      rotary_(std::move(rotary)),
      mask_cache_(std::move(mask_cache)),
      kernel_(kernel) {
  const int64_t C = cfg.n_embd, kv = n_kv_head_ * head_dim_;
  auto lin = [](int64_t in, int64_t out, bool bias) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias)); };
  q_proj = register_module("q_proj", lin(C, C, cfg.bias));
  k_proj = register_module("k_proj", lin(C, kv, cfg.bias));
  v_proj = register_module("v_proj", lin(C, kv, cfg.bias));
  o_proj = register_module("o_proj", lin(C, C, false));
  resid_dropout_ = register_module("resid_dropout", torch::nn::Dropout(cfg.dropout));
}

torch::Tensor LlamaAttentionImpl::forward(const torch::Tensor& x_BTC) {
  TORCH_CHECK(x_BTC.dim() == 3, "LlamaAttention expects (B, T, C), got ", x_BTC.sizes());
  // The whole sequence under sequence parallelism.
  const auto qkv = column_parallel(x_BTC, {column_of(q_proj), column_of(k_proj), column_of(v_proj)}, tp_.get());
  const int64_t B = qkv[0].size(0), T = qkv[0].size(1);
  auto q_BHTD = qkv[0].view({B, T, n_head_, head_dim_}).transpose(1, 2);
  auto k_BKTD = qkv[1].view({B, T, n_kv_head_, head_dim_}).transpose(1, 2);
  auto v_BKTD = qkv[2].view({B, T, n_kv_head_, head_dim_}).transpose(1, 2);
  const auto [cos_TD, sin_TD] = rotary_->cos_sin(T, x_BTC.device());
  q_BHTD = apply_rotary(q_BHTD, cos_TD, sin_TD);
  k_BKTD = apply_rotary(k_BKTD, cos_TD, sin_TD);
  auto y_BHTD = attend(q_BHTD, k_BKTD, v_BKTD);
  auto y_BTC = y_BHTD.transpose(1, 2).contiguous().view({B, T, n_head_ * head_dim_});
  return resid_dropout_(tp_output_linear(o_proj, y_BTC, tp_.get()));
}

void LlamaAttentionImpl::set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm) {
  n_head_ /= comm->size();  // the weights hold this rank's heads already
  n_kv_head_ /= comm->size();
  tp_ = std::move(comm);
}

// Under tensor parallelism this rank's query and key/value heads (n_head_, n_kv_head_ are its own),
// the ranks' outputs summed by o_proj; the whole sequence on every rank.
torch::Tensor LlamaAttentionImpl::forward_cached(const torch::Tensor& x_BTC, LayerKV& kv, int64_t pos) {
  const int64_t B = x_BTC.size(0), T = x_BTC.size(1);
  TORCH_CHECK(!tp_ || !tp_->sequence_parallel, "incremental decoding needs sequence parallelism off");
  TORCH_CHECK(pos + T <= block_size_, "LlamaAttention: positions up to ", pos + T, " exceed block_size ", block_size_);
  const auto qkv = column_parallel(x_BTC, {column_of(q_proj), column_of(k_proj), column_of(v_proj)}, tp_.get());
  auto q_BHTD = qkv[0].view({B, T, n_head_, head_dim_}).transpose(1, 2);
  auto k_BKTD = qkv[1].view({B, T, n_kv_head_, head_dim_}).transpose(1, 2);
  auto v_BKTD = qkv[2].view({B, T, n_kv_head_, head_dim_}).transpose(1, 2);
  const auto [cos_LD, sin_LD] = rotary_->cos_sin(block_size_, x_BTC.device());
  const auto cos_TD = cos_LD.narrow(0, pos, T), sin_TD = sin_LD.narrow(0, pos, T);
  kv.append(apply_rotary(k_BKTD, cos_TD, sin_TD), v_BKTD);
  auto y_BHTD = cached_attention(apply_rotary(q_BHTD, cos_TD, sin_TD), kv.k_BKLD, kv.v_BKLD);
  const torch::Tensor y_BTC = y_BHTD.transpose(1, 2).contiguous().view({B, T, n_head_ * head_dim_});
  return tp_output_linear(o_proj, y_BTC, tp_.get());
}

torch::Tensor LlamaAttentionImpl::attend(const torch::Tensor& q_BHTD, const torch::Tensor& k_BKTD,
                                         const torch::Tensor& v_BKTD) {
  const double p = is_training() ? dropout_ : 0.0;
  const bool grouped = n_kv_head_ != n_head_;
  if (kernel_ == AttentionKernel::Sdpa) {
    return at::scaled_dot_product_attention(q_BHTD, k_BKTD, v_BKTD, /*attn_mask=*/{}, p, /*is_causal=*/true,
                                            /*scale=*/std::nullopt, /*enable_gqa=*/grouped);
  }
  // The GEMM and math paths take one key/value head per query head.
  const int64_t group = n_head_ / n_kv_head_;
  auto k_BHTD = grouped ? k_BKTD.repeat_interleave(group, 1) : k_BKTD;
  auto v_BHTD = grouped ? v_BKTD.repeat_interleave(group, 1) : v_BKTD;
  const int64_t T = q_BHTD.size(2);
  const auto future_TT = mask_cache_->future_mask(T, q_BHTD.device());
  if (kernel_ == AttentionKernel::Gemm) {
    TORCH_CHECK(p == 0.0, "attention kernel gemm has no dropout; model.dropout = ", dropout_, " needs sdpa or math");
    return gemm_causal_attention(q_BHTD, k_BHTD, v_BHTD, future_TT);
  }
  auto att_BHTT = torch::matmul(q_BHTD, k_BHTD.transpose(-2, -1)) * (1.0 / std::sqrt(double(head_dim_)));
  att_BHTT = torch::softmax(att_BHTT.masked_fill(future_TT, -std::numeric_limits<double>::infinity()), -1);
  att_BHTT = torch::dropout(att_BHTT, p, is_training());
  return torch::matmul(att_BHTT, v_BHTD);
}

SwiGLUImpl::SwiGLUImpl(int64_t n_embd, int64_t intermediate, double dropout) {
  auto lin = [](int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); };
  gate_proj = register_module("gate_proj", lin(n_embd, intermediate));
  up_proj = register_module("up_proj", lin(n_embd, intermediate));
  down_proj = register_module("down_proj", lin(intermediate, n_embd));
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x_BTC) {
  const auto gate_up = column_parallel(x_BTC, {column_of(gate_proj), column_of(up_proj)}, tp_.get());
  const torch::Tensor h = swiglu_product(gate_up[0], gate_up[1]);
  return dropout_(tp_output_linear(down_proj, h, tp_.get()));
}

LlamaBlockImpl::LlamaBlockImpl(const ModelConfig& cfg, std::shared_ptr<RotaryCache> rotary,
                               std::shared_ptr<CausalMaskCache> mask_cache, AttentionKernel kernel) {
  input_layernorm = register_module("input_layernorm", RMSNorm(cfg.n_embd, cfg.rms_norm_eps));
  self_attn = register_module("self_attn", LlamaAttention(cfg, std::move(rotary), std::move(mask_cache), kernel));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(cfg.n_embd, cfg.rms_norm_eps));
  mlp = register_module("mlp", SwiGLU(cfg.n_embd, cfg.mlp_width(), cfg.dropout));
}

torch::Tensor LlamaBlockImpl::forward_cached(const torch::Tensor& x_BTC, LayerKV& kv, int64_t pos) {
  auto x = x_BTC + self_attn->forward_cached(input_layernorm(x_BTC), kv, pos);
  return x + mlp(post_attention_layernorm(x));
}

torch::Tensor LlamaBlockImpl::forward(const torch::Tensor& x_BTC) {
  auto x = x_BTC + self_attn(input_layernorm(x_BTC));
  return x + mlp(post_attention_layernorm(x));
}

}  // namespace hwt
