// One GPT-2 block: pre-LayerNorm attention and MLP, each added to the residual stream.
#include "hwtrain/model/block.h"

#include "hwtrain/model/column_parallel.h"
#include "hwtrain/model/linear.h"

namespace hwt {

LayerNormImpl::LayerNormImpl(int64_t n_embd, bool with_bias) : n_embd_(n_embd) {
  weight = register_parameter("weight", torch::ones({n_embd}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({n_embd}));
}

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x_BTC) {
  return torch::layer_norm(x_BTC, {n_embd_}, weight, bias, /*eps=*/1e-5);
}

MLPImpl::MLPImpl(int64_t n_embd, double dropout, bool bias, bool tanh_gelu) : tanh_gelu_(tanh_gelu) {
  c_fc = register_module("c_fc",
                         torch::nn::Linear(torch::nn::LinearOptions(n_embd, 4 * n_embd).bias(bias)));
  c_proj = register_module(
      "c_proj", torch::nn::Linear(torch::nn::LinearOptions(4 * n_embd, n_embd).bias(bias)));
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x_BTC) {
  // Exact (erf) GELU by default, as nanoGPT's nn.GELU(); GPT-2's own checkpoints use the tanh form.
  const auto h = torch::gelu(column_parallel(x_BTC, {column_of(c_fc)}, tp_.get())[0], tanh_gelu_ ? "tanh" : "none");
  return dropout_(tp_output_linear(c_proj, h, tp_.get()));
}

BlockImpl::BlockImpl(const BlockOptions& options, std::shared_ptr<CausalMaskCache> mask_cache,
                     AttentionKernel kernel) {
  ln_1 = register_module("ln_1", LayerNorm(options.n_embd, options.bias));
  attn = register_module(
      "attn", CausalSelfAttention(CausalSelfAttentionOptions{options.n_embd, options.n_head,
                                                             options.dropout, options.bias},
                                  std::move(mask_cache), kernel));
  ln_2 = register_module("ln_2", LayerNorm(options.n_embd, options.bias));
  mlp = register_module("mlp", MLP(options.n_embd, options.dropout, options.bias, options.tanh_gelu));
}

torch::Tensor BlockImpl::forward_cached(const torch::Tensor& x_BTC, LayerKV& kv, int64_t) {
  auto x = x_BTC + attn->forward_cached(ln_1(x_BTC), kv);
  return x + mlp(ln_2(x));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x_BTC) {
  auto x = x_BTC + attn(ln_1(x_BTC));
  return x + mlp(ln_2(x));
}

}  // namespace hwt
