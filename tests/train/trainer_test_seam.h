// TrainerTestSeam: fault injection into a Trainer, for tests only (not part of the Trainer's API,
// and it lives beside the tests): an out-of-memory error at a chosen step, and a hook applied to
// every micro-step's loss (tests simulate overflow or a missing low-precision kernel with it).
#pragma once
#include <functional>

#include "hwtrain/train/trainer.h"

namespace hwt {

class TrainerTestSeam {
 public:
  // The forward of step `step` (0-based) throws OutOfMemoryError once.
  static void inject_oom_at_step(Trainer& t, int64_t step) { t.inject_oom_step_ = step; }
  static void set_loss_hook(Trainer& t, std::function<torch::Tensor(const torch::Tensor&)> hook) {
    t.loss_hook_ = std::move(hook);
  }
  // One training step outside fit() (to profile single steps).
  static StepMetrics step(Trainer& t) { return t.train_step(); }
};

}  // namespace hwt
