// DecoderBlock: what the decoder stacks, whatever the family (GPT-2's Block, the Llama family's
// LlamaBlock): a residual layer (B, T, C) -> (B, T, C) whose attention kernel can be switched.
// The model holds its layers through this base, so activation checkpointing and the layer loop
// are written once.
#pragma once
#include <torch/torch.h>

#include "hwtrain/model/attention_kernel.h"
#include "hwtrain/model/kv_cache.h"

namespace hwt {

class DecoderBlockImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x_BTC) = 0;
  virtual void set_kernel(AttentionKernel kernel) = 0;
  // Incremental decoding (eval, no grad): x holds the positions pos, pos + 1, ... after those in
  // `kv`, whose keys and values are appended.
  virtual torch::Tensor forward_cached(const torch::Tensor& x_BTC, LayerKV& kv, int64_t pos) = 0;
};

}  // namespace hwt
