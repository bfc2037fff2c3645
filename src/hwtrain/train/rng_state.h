// The CPU generator's state (dropout and other sampling draw from it), saved with checkpoints and
// restored when a step is redone (OOM retry, precision fallback) or after probe steps.
#pragma once
#include <torch/torch.h>

namespace hwt {

torch::Tensor cpu_rng_state();
void set_cpu_rng_state(const torch::Tensor& state);

}  // namespace hwt
