// Causal self-attention: the fused SDPA kernel and the reference math path with cached masks.
#include "hwtrain/model/attention.h"
#include "hwtrain/model/linear.h"

#include <cmath>

#include "hwtrain/core/error.h"
#include "hwtrain/model/column_parallel.h"
#include "hwtrain/model/gemm_attention.h"

namespace hwt {

const char* to_string(AttentionKernel kernel) { return enum_name(kernel); }

AttentionKernel parse_attention_kernel(const std::string& name) {
  if (auto kernel = enum_from_name<AttentionKernel>(name)) return *kernel;
  throw ConfigError("model.attention = '" + name +
                    "' is not a kernel; valid: sdpa | gemm | math ('auto' is resolved by the planner)");
}

torch::Tensor CausalMaskCache::future_mask(int64_t T, const torch::Device& device) {
  const Key key{T, static_cast<int>(device.type()), static_cast<int>(device.index())};
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = masks_.find(key);
  if (it != masks_.end()) return it->second;
  auto future_TT = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(device))
                       .triu(/*diagonal=*/1);
  masks_.emplace(key, future_TT);
  ++num_builds_;
  return future_TT;
}

void CausalMaskCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  masks_.clear();
}

int64_t CausalMaskCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(masks_.size());
}

int64_t CausalMaskCache::num_builds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_builds_;
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const CausalSelfAttentionOptions& options,
                                                 std::shared_ptr<CausalMaskCache> mask_cache,
                                                 AttentionKernel kernel)
    : options_(options), mask_cache_(std::move(mask_cache)), kernel_(kernel) {
  TORCH_CHECK(options_.n_head > 0 && options_.n_embd % options_.n_head == 0,
              "CausalSelfAttention: n_embd ", options_.n_embd, " is not divisible by n_head ",
              options_.n_head);
  TORCH_CHECK(mask_cache_, "CausalSelfAttention: a mask cache is required");
  const int64_t C = options_.n_embd;
  c_attn = register_module("c_attn",
                           torch::nn::Linear(torch::nn::LinearOptions(C, 3 * C).bias(options_.bias)));
  c_proj = register_module("c_proj",
                           torch::nn::Linear(torch::nn::LinearOptions(C, C).bias(options_.bias)));
  attn_dropout_ = register_module("attn_dropout", torch::nn::Dropout(options_.dropout));
  resid_dropout_ = register_module("resid_dropout", torch::nn::Dropout(options_.dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x_BTC) {
  TORCH_CHECK(x_BTC.dim() == 3, "CausalSelfAttention expects (B, T, C), got ", x_BTC.sizes());
  // (B, T, 3 C): the whole sequence under sequence parallelism.
  const torch::Tensor qkv_BT3C = column_parallel(x_BTC, {column_of(c_attn)}, tp_.get())[0];
  const int64_t B = qkv_BT3C.size(0), T = qkv_BT3C.size(1);
  // This rank's width: all of n_embd, or its heads' share under tensor parallelism.
  const int64_t C = c_attn->weight.size(0) / 3, D = options_.n_embd / options_.n_head, H = C / D;

  auto qkv = qkv_BT3C.split(C, /*dim=*/2);
  auto q_BHTD = qkv[0].view({B, T, H, D}).transpose(1, 2);
  auto k_BHTD = qkv[1].view({B, T, H, D}).transpose(1, 2);
  auto v_BHTD = qkv[2].view({B, T, H, D}).transpose(1, 2);

  auto y_BHTD = attend(q_BHTD, k_BHTD, v_BHTD);
  auto y_BTC = y_BHTD.transpose(1, 2).contiguous().view({B, T, C});
  return resid_dropout_(tp_output_linear(c_proj, y_BTC, tp_.get()));
}

// Under tensor parallelism this rank's heads only (its cache holds their keys and values), the
// ranks' outputs summed by c_proj; the whole sequence on every rank (sequence parallelism off).
torch::Tensor CausalSelfAttentionImpl::forward_cached(const torch::Tensor& x_BTC, LayerKV& kv) {
  TORCH_CHECK(!tp_ || !tp_->sequence_parallel, "incremental decoding needs sequence parallelism off");
  const int64_t B = x_BTC.size(0), T = x_BTC.size(1);
  const int64_t C = c_attn->weight.size(0) / 3, D = options_.n_embd / options_.n_head, H = C / D;
  auto qkv = column_parallel(x_BTC, {column_of(c_attn)}, tp_.get())[0].split(C, /*dim=*/2);
  auto q_BHTD = qkv[0].view({B, T, H, D}).transpose(1, 2);
  kv.append(qkv[1].view({B, T, H, D}).transpose(1, 2), qkv[2].view({B, T, H, D}).transpose(1, 2));
  auto y_BTC = cached_attention(q_BHTD, kv.k_BKLD, kv.v_BKLD).transpose(1, 2).contiguous().view({B, T, C});
  return tp_output_linear(c_proj, y_BTC, tp_.get());
}

torch::Tensor CausalSelfAttentionImpl::attend(const torch::Tensor& q_BHTD, const torch::Tensor& k_BHTD,
                                             const torch::Tensor& v_BHTD) {
  switch (kernel_) {
    case AttentionKernel::Sdpa:
      return at::scaled_dot_product_attention(q_BHTD, k_BHTD, v_BHTD, /*attn_mask=*/{},
                                              is_training() ? options_.dropout : 0.0, /*is_causal=*/true);
    case AttentionKernel::Gemm:
      TORCH_CHECK(!is_training() || options_.dropout == 0.0, "attention kernel gemm has no dropout; model.dropout = ",
                  options_.dropout, " needs sdpa or math");
      return gemm_causal_attention(q_BHTD, k_BHTD, v_BHTD, mask_cache_->future_mask(q_BHTD.size(2), q_BHTD.device()));
    case AttentionKernel::Math: break;
  }
  return math_attention(q_BHTD, k_BHTD, v_BHTD);
}

torch::Tensor CausalSelfAttentionImpl::math_attention(const torch::Tensor& q_BHTD,
                                                      const torch::Tensor& k_BHTD,
                                                      const torch::Tensor& v_BHTD) {
  const int64_t T = q_BHTD.size(2), D = q_BHTD.size(3);
  auto att_BHTT = torch::matmul(q_BHTD, k_BHTD.transpose(-2, -1)) * (1.0 / std::sqrt(double(D)));
  att_BHTT = att_BHTT.masked_fill(mask_cache_->future_mask(T, q_BHTD.device()),
                                  -std::numeric_limits<double>::infinity());
  att_BHTT = torch::softmax(att_BHTT, /*dim=*/-1);
  att_BHTT = attn_dropout_(att_BHTT);
  return torch::matmul(att_BHTT, v_BHTD);
}

}  // namespace hwt
