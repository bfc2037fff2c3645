// GradientTap: an alias of a tensor whose gradient goes to a function instead of to the tensor.
// The alias shares the tensor's storage (so a ZeRO-3 buffer freed and gathered again is seen by
// both) and its backward hands the incoming gradient to `sink` and passes nothing on: autograd
// then accumulates only the tensor's other uses. The sharding engine taps a tied embedding's use
// as the head, whose gradient it reduces as soon as the head's backward makes it, instead of
// letting autograd hold a vocabulary x width gradient until the embedding's backward at the end.
#pragma once
#include <torch/torch.h>

#include <functional>

namespace hwt {

using GradientSink = std::function<void(const torch::Tensor& grad)>;

// `t` itself when no gradient will flow (grad mode off, or `t` does not require one).
torch::Tensor tap_gradient(const torch::Tensor& t, GradientSink sink);

}  // namespace hwt
