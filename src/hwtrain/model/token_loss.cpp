// The language-model loss: mean fp32 cross-entropy; fp16 logits read directly on CUDA, bf16 logits
// through the chunked loss (token_loss.h).
#include "hwtrain/model/token_loss.h"

#include <algorithm>

namespace hwt {

namespace {
constexpr int64_t kIgnoredTarget = -1;
// Elements per chunk of rows: 256 MiB of fp32 scratch, a few dozen chunks for a GPU's micro-batch of
// a 50k-128k vocabulary (each chunk a handful of kernels). The forward holds two such buffers at
// once (the chunk in fp32 and logsumexp's temporary), the backward one.
constexpr int64_t kChunkElements = int64_t{1} << 26;

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct ChunkedCrossEntropy : public torch::autograd::Function<ChunkedCrossEntropy> {
  // Saves the 16-bit logits, the targets, each row's fp32 log-sum-exp and the count of targets.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits_NV, const torch::Tensor& targets_N,
                               int64_t chunk_rows) {
    const int64_t n = logits_NV.size(0);
    const torch::Tensor valid_N = targets_N.ne(kIgnoredTarget);
    const torch::Tensor safe_N = targets_N.clamp_min(0).unsqueeze(1);
    torch::Tensor lse_N = torch::empty({n}, logits_NV.options().dtype(torch::kFloat));
    torch::Tensor target_N = torch::empty({n}, lse_N.options());
    for (int64_t r = 0; r < n; r += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, n - r);
      const torch::Tensor x = logits_NV.narrow(0, r, rows).to(torch::kFloat);
      lse_N.narrow(0, r, rows).copy_(x.logsumexp(1));
      target_N.narrow(0, r, rows).copy_(x.gather(1, safe_N.narrow(0, r, rows)).squeeze(1));
    }
    const torch::Tensor count = valid_N.sum().to(torch::kFloat);  // 0 -> the loss is 0 / 0 = NaN, as cross_entropy's
    ctx->save_for_backward({logits_NV, targets_N, lse_N, count});
    ctx->saved_data["chunk_rows"] = chunk_rows;
    return (lse_N - target_N).masked_fill(valid_N.logical_not(), 0.0).sum() / count;
  }

  // d loss / d logit = (softmax - one-hot) / count on the rows with a target, written in the logits'
  // dtype a chunk at a time: exp(x - lse) in fp32 scratch, scaled in place, then cast.
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &logits_NV = saved[0], &targets_N = saved[1], &lse_N = saved[2], &count = saved[3];
    TORCH_CHECK(!torch::GradMode::is_enabled(), "chunked_cross_entropy: double backward is not supported");
    const int64_t chunk_rows = ctx->saved_data["chunk_rows"].toInt(), n = logits_NV.size(0);
    // Rows without a target get no gradient (also when none has one: 0, not g / 0 * 0, as nll_loss).
    const torch::Tensor valid_N = targets_N.ne(kIgnoredTarget);
    const torch::Tensor scale_N = torch::where(valid_N, grads[0] / count, torch::zeros_like(grads[0]));
    const torch::Tensor safe_N = targets_N.clamp_min(0).unsqueeze(1);
    torch::Tensor grad_NV = torch::empty_like(logits_NV);
    for (int64_t r = 0; r < n; r += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, n - r);
      const torch::Tensor s = scale_N.narrow(0, r, rows).unsqueeze(1);
      torch::Tensor p = logits_NV.narrow(0, r, rows).to(torch::kFloat);
      p.sub_(lse_N.narrow(0, r, rows).unsqueeze(1)).exp_().mul_(s);
      p.scatter_add_(1, safe_N.narrow(0, r, rows), s.neg());
      grad_NV.narrow(0, r, rows).copy_(p);
    }
    return {grad_NV, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor token_cross_entropy_reference(const torch::Tensor& logits_NV, const torch::Tensor& targets_N) {
  return torch::nn::functional::cross_entropy(
      logits_NV.to(torch::kFloat), targets_N,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnoredTarget));
}

torch::Tensor chunked_cross_entropy(const torch::Tensor& logits_NV, const torch::Tensor& targets_N, int64_t chunk_rows) {
  if (chunk_rows <= 0) chunk_rows = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(1, logits_NV.size(1)));
  return ChunkedCrossEntropy::apply(logits_NV, targets_N, chunk_rows);
}

torch::Tensor token_cross_entropy(const torch::Tensor& logits_NV, const torch::Tensor& targets_N) {
  if (!logits_NV.is_cuda()) return token_cross_entropy_reference(logits_NV, targets_N);
  if (logits_NV.scalar_type() == torch::kBFloat16) return chunked_cross_entropy(logits_NV, targets_N);
  if (logits_NV.scalar_type() != torch::kHalf) return token_cross_entropy_reference(logits_NV, targets_N);
  // cross_entropy is nll_loss of log_softmax; autograd's backward of _log_softmax with a 16-bit
  // input is _log_softmax_backward_data(..., input_dtype) writing the fp16 gradient.
  const torch::Tensor logp_NV = at::_log_softmax(logits_NV, /*dim=*/-1, /*half_to_float=*/true);
  return at::nll_loss(logp_NV, targets_N, /*weight=*/{}, at::Reduction::Mean, kIgnoredTarget);
}

}  // namespace hwt
