// Optimizer in backward: AdamW steps each parameter as soon as autograd has finished its gradient
// (a post-accumulate-grad hook, the C++ side of torch.Tensor.register_post_accumulate_grad_hook,
// as torchtune's optimizer_in_bwd does), then frees that gradient. A step's gradients then never
// exist all at once: the step holds one block's gradients instead of the whole model's (the tied
// embedding's waits for its second use at the very end of backward). The update is the same
// per-parameter AdamW update, so without clipping the weights equal those of a step after backward.
// The hook sits in autograd's one post-accumulate slot per tensor (torch::autograd::impl, the slot
// Python's hooks use); a parameter that already has one is refused.
// What it rules out (config and planner refuse these): global-norm clipping and fp16 loss
// scaling, which must see every gradient before any update; gradient accumulation and OOM retries,
// which run several backward passes per update; data-parallel gradient averaging.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "hwtrain/train/adamw.h"

namespace hwt {

class OptimizerInBackward {
 public:
  // Installs a hook on every parameter of `optimizer` (which must outlive this object).
  explicit OptimizerInBackward(AdamW& optimizer);
  ~OptimizerInBackward();  // removes the hooks
  OptimizerInBackward(const OptimizerInBackward&) = delete;
  OptimizerInBackward& operator=(const OptimizerInBackward&) = delete;

  // Before each backward pass: the learning rate the hooks step at; clears the counters below.
  void begin_step(double lr);
  // After it: how many parameters the pass updated, and the L2 norm of their gradients (the
  // figure clipping would have read; reported, not applied).
  int64_t parameters_updated() const;
  double grad_norm() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::vector<torch::Tensor> params_;
};

}  // namespace hwt
