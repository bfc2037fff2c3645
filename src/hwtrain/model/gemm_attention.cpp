#include "hwtrain/model/gemm_attention.h"

#include <ATen/autocast_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace hwt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// (B, H, T, D) with any strides -> contiguous (B*H, T, D), one copy at most.
torch::Tensor as_batched(const torch::Tensor& x_BHTD) {
  return x_BHTD.contiguous().view({-1, x_BHTD.size(2), x_BHTD.size(3)});
}

// Query rows are processed in chunks; a chunk attends to keys [0, end) only, so the blocks above
// the diagonal are never computed (5/8 of the full T x T work at four chunks, ~1/2 at many) and
// the mask is applied to the diagonal block alone.
struct Chunk {
  int64_t begin, end;
  int64_t rows() const { return end - begin; }
};
std::vector<Chunk> query_chunks(int64_t T, int64_t chunk_rows) {
  std::vector<Chunk> chunks;
  for (int64_t begin = 0; begin < T; begin += chunk_rows) chunks.push_back({begin, std::min(T, begin + chunk_rows)});
  return chunks;
}

struct GemmAttentionFunction : public torch::autograd::Function<GemmAttentionFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_BHTD, const torch::Tensor& k_BHTD,
                               const torch::Tensor& v_BHTD, const torch::Tensor& future_TT, int64_t chunk_rows) {
    // The dtypes are chosen by the caller; autocast must not re-cast the softmax to fp32.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const int64_t T = q_BHTD.size(2);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q_BHTD.size(3)));
    auto q = as_batched(q_BHTD).mul_(scale);  // scaled once here; grad_k reuses it
    auto k = as_batched(k_BHTD);
    auto v = as_batched(v_BHTD);
    std::vector<torch::Tensor> saved{q, k, v}, outs;
    for (const Chunk& c : query_chunks(T, chunk_rows)) {
      auto scores = torch::bmm(q.narrow(1, c.begin, c.rows()), k.narrow(1, 0, c.end).transpose(1, 2));
      scores.narrow(2, c.begin, c.rows())
          .masked_fill_(future_TT.narrow(0, 0, c.rows()).narrow(1, 0, c.rows()),
                        -std::numeric_limits<double>::infinity());
      auto probs = torch::softmax(scores, -1);
      scores.reset();
      outs.push_back(torch::bmm(probs, v.narrow(1, 0, c.end)));
      saved.push_back(probs);
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["chunk_rows"] = chunk_rows;
    auto out = outs.size() == 1 ? outs[0] : torch::cat(outs, 1);
    return out.view(q_BHTD.sizes());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2];
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto chunks = query_chunks(q.size(1), ctx->saved_data["chunk_rows"].toInt());
    const auto shape = grad_outputs[0].sizes().vec();
    auto grad_out = as_batched(grad_outputs[0]).to(q.scalar_type());
    auto grad_q = torch::empty_like(q);
    torch::Tensor grad_k, grad_v;
    // Last chunk first: it covers every key, so it creates grad_k and grad_v and the others add to them.
    for (size_t i = chunks.size(); i-- > 0;) {
      const Chunk& c = chunks[i];
      const auto& probs = saved[3 + i];
      auto grad_out_c = grad_out.narrow(1, c.begin, c.rows());
      auto keys = k.narrow(1, 0, c.end);
      auto grad_probs = torch::bmm(grad_out_c, v.narrow(1, 0, c.end).transpose(1, 2));
      // softmax backward: probs * (grad_probs - sum(grad_probs * probs)); masked entries stay 0.
      auto grad_scores = at::_softmax_backward_data(grad_probs, probs, -1, probs.scalar_type());
      grad_probs.reset();
      grad_q.narrow(1, c.begin, c.rows()).copy_(torch::bmm(grad_scores, keys));
      auto q_c = q.narrow(1, c.begin, c.rows());  // carries the scale already
      if (!grad_k.defined()) {
        grad_v = torch::bmm(probs.transpose(1, 2), grad_out_c);
        grad_k = torch::bmm(grad_scores.transpose(1, 2), q_c);
      } else {
        grad_v.narrow(1, 0, c.end).baddbmm_(probs.transpose(1, 2), grad_out_c);
        grad_k.narrow(1, 0, c.end).baddbmm_(grad_scores.transpose(1, 2), q_c);
      }
    }
    grad_q.mul_(scale);
    return {grad_q.view(shape), grad_k.view(shape), grad_v.view(shape), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

int64_t gemm_attention_kept_probabilities(int64_t T, int64_t chunk_rows) {
  int64_t kept = 0;
  for (const Chunk& c : query_chunks(T, chunk_rows)) kept += c.rows() * c.end;
  return kept;
}

torch::Tensor gemm_causal_attention(const torch::Tensor& q_BHTD, const torch::Tensor& k_BHTD,
                                    const torch::Tensor& v_BHTD, const torch::Tensor& future_TT, int64_t chunk_rows) {
  TORCH_CHECK(q_BHTD.dim() == 4 && k_BHTD.sizes() == q_BHTD.sizes() && v_BHTD.sizes() == q_BHTD.sizes(),
              "gemm_causal_attention expects q, k, v of one shape (B, H, T, D), got ", q_BHTD.sizes(), ", ",
              k_BHTD.sizes(), ", ", v_BHTD.sizes());
  TORCH_CHECK(chunk_rows > 0, "gemm_causal_attention: chunk_rows must be positive, got ", chunk_rows);
  const auto device_type = q_BHTD.device().type();
  const auto dtype = at::autocast::is_autocast_enabled(device_type) ? at::autocast::get_autocast_dtype(device_type)
                                                                     : q_BHTD.scalar_type();
  return GemmAttentionFunction::apply(q_BHTD.to(dtype), k_BHTD.to(dtype), v_BHTD.to(dtype), future_TT, chunk_rows);
}

}  // namespace hwt
