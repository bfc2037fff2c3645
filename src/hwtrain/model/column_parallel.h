// Column-parallel linear layers (their weights cut along the output dimension) that read one
// input, as one autograd function whose backward overlaps its collective with the weight
// gradients, as Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication does:
// - without sequence parallelism the input enters whole (Megatron's f: identity forward); backward
//   computes the input's gradient, starts its all-reduce over the group, computes the weights'
//   and biases' gradients meanwhile, and waits only then;
// - with sequence parallelism the input enters as this rank's slice of the sequence, all-gathered
//   forward. Only the slice is kept for backward (1/t of the whole input): backward starts its
//   all-gather again, computes the input's gradient meanwhile, then starts the reduce-scatter of
//   that gradient and computes the weights' gradients meanwhile (Korthikanti et al. 2022).
// Layers reading the same input (q | k | v, gate | up) share one collective each way, and under
// autocast the input is cast once and sent in the autocast dtype (bf16 halves the all-gather).
// Without a group each layer is hwt::linear, unchanged.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "hwtrain/model/linear.h"
#include "hwtrain/model/tensor_parallel.h"

namespace hwt {

// One layer: this rank's rows of the weight (out, in) and of the bias (out; undefined for none).
struct ColumnLinear {
  torch::Tensor weight, bias;
};
inline ColumnLinear column_of(torch::nn::Linear& layer) { return {layer->weight, layer->bias}; }

// x_BTC (B, T, C), or (B, T / t, C) under sequence parallelism: each layer's output (B, T, out)
// in the compute dtype (autocast's where it is on). Every layer has a bias or none does.
std::vector<torch::Tensor> column_parallel(const torch::Tensor& x_BTC, const std::vector<ColumnLinear>& layers,
                                           TensorParallelComm* comm);

}  // namespace hwt
