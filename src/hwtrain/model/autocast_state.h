// AutocastState: a snapshot of the thread's autocast settings (enabled flag and dtype for CPU and
// CUDA), and a guard that applies a snapshot for a scope and puts the previous one back.
// LibTorch has no RAII autocast guard (pytorch#44710); activation checkpointing needs one to
// recompute a block under the autocast state of its forward pass. Uses the 2.x per-device API.
#pragma once
#include <torch/torch.h>

namespace hwt {

struct AutocastState {
  bool cpu_enabled = false;
  bool cuda_enabled = false;
  at::ScalarType cpu_dtype = at::kBFloat16;
  at::ScalarType cuda_dtype = at::kHalf;

  static AutocastState current();
  void apply() const;
};

// Applies `state` for the guard's lifetime. While the guard is active the autocast weight-cast
// cache is off, so casts made here (possibly on an autograd worker thread) never outlive it.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  AutocastState previous_;
  bool previous_cache_enabled_;
};

}  // namespace hwt
