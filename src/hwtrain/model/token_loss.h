// The language-model loss over a batch's tokens: mean cross-entropy in fp32 of [N, V] logits against
// [N] targets, targets equal to -1 ignored (NaN when every target is ignored).
//
// On CUDA with fp16 logits (autocast's head output on GPUs without bf16) the log-softmax reads the
// fp16 logits and writes fp32 directly (`at::_log_softmax(x, -1, /*half_to_float=*/true)`), and its
// backward writes the fp16 gradient directly: the same fp32 arithmetic as casting the logits first
// (the cast is exact), without the fp32 copy of the logits and of their gradient. CUDA's kernel has
// this conversion for fp16 only ("conversion is supported for Half type only", measured on an H100
// with torch 2.11), so bf16 logits, like every CPU tensor, are cast to fp32 first.
#pragma once

#include <torch/torch.h>

namespace hwt {

torch::Tensor token_cross_entropy(const torch::Tensor& logits_NV, const torch::Tensor& targets_N);

// The reference: cast to fp32, then cross_entropy (what every device computed before).
torch::Tensor token_cross_entropy_reference(const torch::Tensor& logits_NV, const torch::Tensor& targets_N);

}  // namespace hwt
