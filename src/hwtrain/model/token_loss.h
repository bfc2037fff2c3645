// The language-model loss over a batch's tokens: mean cross-entropy in fp32 of [N, V] logits against
// [N] targets, targets equal to -1 ignored (NaN when every target is ignored).
//
// On CUDA with fp16 logits (autocast's head output on GPUs without bf16) the log-softmax reads the
// fp16 logits and writes fp32 directly (`at::_log_softmax(x, -1, /*half_to_float=*/true)`), and its
// backward writes the fp16 gradient directly: the same fp32 formula as casting the logits first (the
// cast is exact), without the fp32 copy of the logits and of their gradient. On an H100 at 16384 x
// 50304 the loss ran 1.8x faster (7.7 against 14.2 ms) and its peak fell from 3.0 to 2.5 fp32
// copies (bench/ce_memory.py); the loss or gradient bits differed from cast-first's there (not
// examined further), though they were equal at 777 x 5003 (tests/model/cuda_kernels_test.cpp).
// CUDA's kernel has this conversion for fp16 only ("conversion is supported for Half type only"), so
// bf16 logits, like every CPU tensor, are cast to fp32 first.
#pragma once

#include <torch/torch.h>

namespace hwt {

torch::Tensor token_cross_entropy(const torch::Tensor& logits_NV, const torch::Tensor& targets_N);

// The reference: cast to fp32, then cross_entropy (what every device computed before).
torch::Tensor token_cross_entropy_reference(const torch::Tensor& logits_NV, const torch::Tensor& targets_N);

}  // namespace hwt
