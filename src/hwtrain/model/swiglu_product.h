// SwiGLU's product silu(gate) * up as one autograd node that keeps only gate and up for backward and
// recomputes silu(gate) there: autograd's two nodes (silu, then the product) also keep silu(gate),
// one more [tokens, intermediate] tensor per block, the largest the Llama block saves. The backward
// is autograd's own formulas (grad * up through silu_backward; grad * silu(gate)), so values and
// gradients are bit-identical to the unfused expression; the cost is one silu more per backward.
#pragma once

#include <torch/torch.h>

namespace hwt {

torch::Tensor swiglu_product(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace hwt
