// A torch::nn::Linear applied as PyTorch's nn.Linear applies it: at::linear, which folds a
// (B, T, C) input to 2-D and fuses the bias into the GEMM (cuBLASLt's bias epilogue on CUDA,
// addmm on the CPU). LibTorch's own torch::nn::Linear::forward instead multiplies and then adds
// the bias in a separate broadcast kernel: for GPT-2 124M at micro-batch 16 on an H100 that was
// 48 extra kernels and ~6 ms of a 65 ms step (bench/gpu_profile.sh).
#pragma once
#include <torch/torch.h>

namespace hwt {

inline torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return torch::linear(x, layer->weight, layer->bias);
}

}  // namespace hwt
