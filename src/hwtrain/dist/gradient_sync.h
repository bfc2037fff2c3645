// GradientSync: the seam between the trainer and data parallelism. The trainer says before each
// backward whether gradients must be synchronized after it (only on the last micro-step of an
// accumulation), and waits for the reductions before unscaling and clipping.
#pragma once
#include <torch/torch.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hwt {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void begin_micro_step(bool sync_after_backward) = 0;
  virtual void finish() = 0;  // gradients are averaged across ranks on return
  // A step that failed (an OOM before a redo): forget its gradients and reductions.
  virtual void discard() {}
  // Whether this step has already issued a collective the other ranks' step issues once (a bucket
  // all-reduced during the last micro-step's backward): a redo on this rank alone would pair its
  // calls with the wrong ones.
  virtual bool collective_started() const { return false; }
  // Where finish() left the averaged gradients: nullopt when in the parameters' own .grad (DDP);
  // a sharding engine's gradient shards, by parameter name, otherwise (dist/sharded_parameters.h).
  virtual std::optional<std::vector<std::pair<std::string, torch::Tensor>>> gradient_shards() const {
    return std::nullopt;
  }
};

}  // namespace hwt
