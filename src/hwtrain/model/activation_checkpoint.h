// Activation checkpointing for LibTorch C++ (which lacks torch.utils.checkpoint, pytorch#52744):
// run a function of one tensor (a transformer block) without keeping its activations, and
// recompute it during backward. A reentrant torch::autograd::Function:
//   forward:  runs fn(x) under NoGradGuard and saves only x, the RNG state(s) and autocast state;
//   backward: restores the CPU RNG state (and the CUDA one of x's device) and the autocast state
//             of the forward pass, re-runs fn on a detached x with grad enabled, and returns the
//             gradients for x and for `params`, which autograd accumulates into their .grad.
// Dropout masks therefore match, and gradients equal those of the plain forward.
// Not supported: double backward (create_graph), and other threads drawing from the default
// generators during a backward pass (their draws would interleave with the recomputation's).
#pragma once
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace hwt {

using TensorFn = std::function<torch::Tensor(const torch::Tensor&)>;

// y = fn(x) with activations recomputed in backward. `params` must list every tensor fn uses
// that needs a gradient (a block's parameters); ones that do not require grad are skipped.
torch::Tensor checkpointed(const TensorFn& fn, const torch::Tensor& x,
                           const std::vector<torch::Tensor>& params);

}  // namespace hwt
