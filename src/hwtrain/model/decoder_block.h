// DecoderBlock: what the decoder stacks, whatever the family (GPT-2's Block, the Llama family's
// LlamaBlock): a residual layer (B, T, C) -> (B, T, C) whose attention kernel can be switched.
// The model holds its layers through this base, so activation checkpointing and the layer loop
// are written once.
#pragma once
#include <torch/torch.h>

#include "hwtrain/model/attention_kernel.h"
#include "hwtrain/model/kv_cache.h"
#include "hwtrain/model/tensor_parallel.h"

namespace hwt {

class DecoderBlockImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x_BTC) = 0;
  virtual void set_kernel(AttentionKernel kernel) = 0;
  // Incremental decoding (eval, no grad): x holds the positions pos, pos + 1, ... after those in
  // `kv`, whose keys and values are appended.
  virtual torch::Tensor forward_cached(const torch::Tensor& x_BTC, LayerKV& kv, int64_t pos) = 0;
  // Tensor parallel: the layer's weights are already cut to this rank's shard (GPT::set_tensor_parallel);
  // from now on it runs its heads and MLP columns and sums the partial outputs over `comm`.
  virtual void set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm) = 0;
};

}  // namespace hwt
