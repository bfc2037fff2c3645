// AutocastGuard: an RAII autocast region for CPU or CUDA (the C++ frontend has only setters).
// Saves and restores the enabled flag and dtype of the device type, and clears the autocast
// cache on exit when it was the outermost region, as Python's torch.autocast does. `cache` is
// torch.autocast's cache_enabled: false makes every use of a weight cast it anew (the previous
// setting is restored on exit).
#pragma once
#include <torch/torch.h>

#include "hwtrain/plan/plan.h"

namespace hwt {

// The autocast dtype of a planned precision (kFloat32 for fp32: no autocast).
c10::ScalarType autocast_dtype(Precision p);

class AutocastGuard {
 public:
  // dtype kFloat32 (or enabled == false) makes a region without autocast.
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled = true, bool cache = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool prev_enabled_;
  c10::ScalarType prev_dtype_;
  bool prev_cache_;
  bool active_;
};

}  // namespace hwt
