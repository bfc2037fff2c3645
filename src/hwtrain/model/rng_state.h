// The random generators a model draws from (dropout, sampling): the CPU's and, on a CUDA device,
// that device's. Activation checkpointing forks them around a recomputation; the trainer's
// checkpoints save both ("rng.cpu", "rng.cuda") so a resumed run draws the same numbers, and a
// redone step (OOM retry, precision fallback) and the batch-size probe put them back as they were.
#pragma once
#include <torch/torch.h>

namespace hwt {

struct RngState {
  torch::Tensor cpu;
  torch::Tensor cuda;  // the state of the training device's generator; undefined on CPU
};

// The generators' states now; `device` is the training device (its generator is read when CUDA).
RngState rng_state(const torch::Device& device);
// Sets the generators; a CUDA state is applied only when `device` is CUDA.
void set_rng_state(const RngState& state, const torch::Device& device);

}  // namespace hwt
