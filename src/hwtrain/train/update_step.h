// The update that follows backward when the optimizer steps after it, written once for the Trainer
// and for HardwareAwareOptimizer::step (a user's own loop):
//   unscale the gradients (fp16 loss scaling), measure their global norm and clip it, skip the
//   update when the scaler found inf/NaN or the loss is non-finite in low precision (the weights
//   stay the last good ones), else update; then update the loss scale and zero the gradients.
// fp32 never skips on the loss: there is no lower precision to blame, and the Trainer's fallback
// logic (train/mixed_precision.h) counts such steps.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "hwtrain/train/adamw.h"
#include "hwtrain/train/grad_scaler.h"

namespace hwt {

struct UpdateRule {
  double max_grad_norm = 0;    // clip the global L2 norm to this; <= 0: measure it, clip nothing
  bool low_precision = false;  // bf16/fp16 autocast in force: a non-finite loss skips the update
  // Gradients sharded over ranks (ZeRO-2/3): the global norm from this rank's norm (collective).
  std::function<torch::Tensor(const torch::Tensor&)> global_norm;
  // ... and fp16's inf/NaN verdict summed over the ranks in place (collective).
  std::function<void(torch::Tensor&)> sum_across_ranks;
};

struct UpdateOutcome {
  double grad_norm = 0;            // before clipping (after unscaling)
  bool updated = false;
  bool skipped_for_loss = false;   // a non-finite loss in low precision (the scaler counts its own skips)
};

// `update` performs the optimizer step (and whatever must follow it, e.g. re-syncing shards);
// `zero_grad` clears the gradients afterwards, updated or not.
UpdateOutcome update_after_backward(const std::vector<torch::Tensor>& params, GradScaler& scaler, double loss,
                                    const UpdateRule& rule, const std::function<void()>& update,
                                    const std::function<void()>& zero_grad);

// The same update from device tensors alone, for a step captured as a CUDA graph
// (train/cuda_graph_step.h): the global norm clipped to `max_grad_norm` by the same kernels, then
// AdamW at the learning rate held in `lr`, skipped where `found_inf` is 1 (the caller's verdict on
// the loss). No fp16 scaling, no collectives, no host read, no zeroing. Returns the norm before
// clipping, on the device.
torch::Tensor update_on_device(const std::vector<torch::Tensor>& params, double max_grad_norm, AdamW& optimizer,
                               const torch::Tensor& lr, const torch::Tensor& found_inf);

}  // namespace hwt
