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
// CUDA's kernel has this conversion for fp16 only ("conversion is supported for Half type only").
//
// On CUDA with bf16 logits (autocast's head output on H100s and A100s) chunked_cross_entropy below
// replaces the cast: it saves the bf16 logits and one fp32 log-sum-exp per row, and its backward
// writes the bf16 gradient a chunk of rows at a time. The cast path holds an fp32 copy of the logits
// (the saved log-softmax), writes an fp32 gradient and then its bf16 copy: 2.5-3 fp32 copies at the
// backward's peak on an H100; this one holds 1 (the bf16 logits and their bf16 gradient) and one
// chunk's fp32 scratch (two in its forward, before the gradient exists). Same formula, other roundings: the loss within fp32 rounding, the gradient
// within a bf16 rounding (tests/model/token_loss_test.cpp, on CPU tensors). Its speed and memory on
// a GPU are not measured yet (no GPU this session); the memory model keeps 3 copies until they are.
// Every CPU tensor is cast to fp32 first (the path CPU training losses are recorded with).
#pragma once

#include <torch/torch.h>

namespace hwt {

torch::Tensor token_cross_entropy(const torch::Tensor& logits_NV, const torch::Tensor& targets_N);

// The 16-bit loss without an fp32 copy of the logits (see above), on any device; chunk_rows <= 0:
// rows of 2^26 fp32 elements (256 MiB of scratch). Targets must be -1 (ignored) or in [0, V): they are
// not checked (that would synchronize with the device); the data pipeline makes no others.
// First-order only (a double backward is refused).
torch::Tensor chunked_cross_entropy(const torch::Tensor& logits_NV, const torch::Tensor& targets_N, int64_t chunk_rows = 0);

// The reference: cast to fp32, then cross_entropy (what every device computed before).
torch::Tensor token_cross_entropy_reference(const torch::Tensor& logits_NV, const torch::Tensor& targets_N);

}  // namespace hwt
