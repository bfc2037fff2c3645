// The language-model loss: mean fp32 cross-entropy, fp16 logits read directly on CUDA.
#include "hwtrain/model/token_loss.h"

namespace hwt {

namespace {
constexpr int64_t kIgnoredTarget = -1;
}

torch::Tensor token_cross_entropy_reference(const torch::Tensor& logits_NV, const torch::Tensor& targets_N) {
  return torch::nn::functional::cross_entropy(
      logits_NV.to(torch::kFloat), targets_N,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnoredTarget));
}

torch::Tensor token_cross_entropy(const torch::Tensor& logits_NV, const torch::Tensor& targets_N) {
  if (!logits_NV.is_cuda() || logits_NV.scalar_type() != torch::kHalf) {
    return token_cross_entropy_reference(logits_NV, targets_N);
  }
  // cross_entropy is nll_loss of log_softmax; autograd's backward of _log_softmax with a 16-bit
  // input is _log_softmax_backward_data(..., input_dtype) writing the fp16 gradient.
  const torch::Tensor logp_NV = at::_log_softmax(logits_NV, /*dim=*/-1, /*half_to_float=*/true);
  return at::nll_loss(logp_NV, targets_N, /*weight=*/{}, at::Reduction::Mean, kIgnoredTarget);
}

}  // namespace hwt
