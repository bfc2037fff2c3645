// The token lookup of an embedding whose weight is also the LM head (GPT-2, tie_word_embeddings),
// without the whole-table gradient buffer. torch::embedding's backward makes a dense vocab x dim
// gradient (147 MiB in fp32 for GPT-2 124M) that exists beside the head's own gradient for the same
// weight at the very end of backward, where it set the step's peak. This lookup's backward hands the
// weight a sparse gradient of the rows the batch used; autograd adds it in place into the head's
// dense gradient (dense + sparse in the weight's input buffer), so the weight's gradient is dense,
// and equal to the bit: the rows are summed by the same kernel (embedding_dense_backward) over the
// batch's token ids renumbered in order, so each row's sum runs in the same order. Only where the
// head's gradient reaches the same weight in the same backward: alone, the weight's .grad would be
// sparse (GPT::embed decides, model/gpt.h). GPT uses it on the CPU only: on CUDA, unique() copies its
// size to the host (a wait in every backward) and cannot be captured in a CUDA graph.
#pragma once
#include <torch/torch.h>

namespace hwt {

// weight[idx] (any shape of int64 ids); its gradient for `weight` is a coalesced sparse tensor.
torch::Tensor tied_embedding_lookup(const torch::Tensor& idx, const torch::Tensor& weight);

}  // namespace hwt
