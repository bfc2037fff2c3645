// A torch::nn::Linear applied on CUDA as PyTorch's nn.Linear applies it: at::linear, which folds
// a (B, T, C) input to 2-D and fuses the bias into the GEMM (cuBLASLt's bias epilogue). LibTorch's
// own torch::nn::Linear::forward multiplies and then adds the bias in a separate broadcast
// kernel: for GPT-2 124M at micro-batch 16 on an H100 that was 48 extra kernels and ~6 ms of a
// 65 ms step (bench/gpu_profile.sh). On the CPU the LibTorch path stays: the fused addmm rounds
// bf16 runs differently, and the golden losses recorded on two CPU kinds (tests/cli) hold the
// current bits; its speed on the CPU was not measured.
#pragma once
#include <torch/torch.h>

namespace hwt {

// x through `weight` and `bias` (undefined for none) exactly as linear(layer, x) below: LibTorch's
// Linear::forward is torch::nn::functional::linear.
inline torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (x.is_cuda()) return torch::linear(x, weight, bias);
  return torch::nn::functional::linear(x, weight, bias);
}

inline torch::Tensor linear(torch::nn::Linear& layer, const torch::Tensor& x) {
  return linear(x, layer->weight, layer->bias);
}

}  // namespace hwt
