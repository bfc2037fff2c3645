// The token lookup of an embedding whose weight is also the LM head (GPT-2, tie_word_embeddings),
// without a second whole-table gradient. torch::embedding's backward makes a dense vocab x dim
// gradient (147 MiB in fp32 for GPT-2 124M) beside the head's own gradient for the same weight at the
// very end of backward, where it set the step's peak. This lookup's backward makes a sparse gradient
// of the rows the batch used instead: the rows are summed by the same kernel (embedding_dense_backward)
// over the batch's token ids renumbered in order, so each row's sum runs in the same order, and the
// weight's gradient is dense and equal to the bit.
// Autograd adds a sparse gradient to a dense one out of place (InputBuffer::accumulate adds in place
// only dense to dense), which would again make a second vocab x dim tensor. So the head's use of the
// weight is paired with the lookup (tied_head_weight, through a TiedGradientSlot): the head's
// backward hands its gradient to the slot instead of to the weight, and the lookup's backward, which
// runs after it (the lookup feeds the head), adds its rows into that gradient in place and passes the
// sum on as the weight's one gradient. Unpaired (or if the head's backward has not run by then), the
// lookup's gradient is the sparse rows alone, which autograd adds to the head's gradient.
// Only where the head's gradient reaches the same weight in the same backward: alone, the weight's
// .grad would be sparse (GPT::embed decides, model/gpt.h). GPT uses it on the CPU only: on CUDA,
// unique() copies its size to the host (a wait in every backward) and cannot be captured in a CUDA graph.
#pragma once
#include <memory>

#include <torch/custom_class.h>
#include <torch/torch.h>

namespace hwt {

// What the head's backward hands the lookup's (model/tied_embedding.cpp).
struct TiedGradientSlot : torch::CustomClassHolder {
  torch::Tensor head_grad;     // the head's gradient for the weight, until the lookup's backward takes it
  bool lookup_done = false;    // the lookup's backward ran: a later head gradient goes to the weight itself
  // The lookup's autograd node. Expired (its graph freed unrun: a forward that threw or was never
  // backpropagated), nothing would take the head's gradient, so the head keeps it.
  std::weak_ptr<torch::autograd::Node> lookup;
};

// weight[idx] (any shape of int64 ids). Its gradient for `weight`: the head's gradient from `slot`
// with the batch's rows added in place, or, unpaired, a coalesced sparse tensor of the rows.
torch::Tensor tied_embedding_lookup(const torch::Tensor& idx, const torch::Tensor& weight,
                                    c10::intrusive_ptr<TiedGradientSlot> slot = {});

// `weight` for the head, paired with a lookup through `slot`: equal to it (a view), whose backward
// hands the gradient to `slot` (unless the lookup's backward already ran or its graph is gone, or the
// backward builds a graph).
torch::Tensor tied_head_weight(const torch::Tensor& weight, c10::intrusive_ptr<TiedGradientSlot> slot);

}  // namespace hwt
