// GradientSync: the seam between the trainer and data parallelism. The trainer says before each
// backward whether gradients must be synchronized after it (only on the last micro-step of an
// accumulation), and waits for the reductions before unscaling and clipping.
#pragma once

namespace hwt {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void begin_micro_step(bool sync_after_backward) = 0;
  virtual void finish() = 0;  // gradients are averaged across ranks on return
  // A step that failed (an OOM before a redo): forget its gradients and reductions.
  virtual void discard() {}
};

}  // namespace hwt
