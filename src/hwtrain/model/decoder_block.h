// DecoderBlock: what the decoder stacks, whatever the family (GPT-2's Block, the Llama family's
// LlamaBlock): a residual layer (B, T, C) -> (B, T, C) whose attention kernel can be switched.
// The model holds its layers through this base, so activation checkpointing and the layer loop
// are written once.
#pragma once
#include <torch/torch.h>

#include "hwtrain/model/attention_kernel.h"

namespace hwt {

class DecoderBlockImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x_BTC) = 0;
  virtual void set_kernel(AttentionKernel kernel) = 0;
};

}  // namespace hwt
