// Autocast snapshots over at::autocast's per-device 2.x API.
#include "hwtrain/model/autocast_state.h"

#include <ATen/autocast_mode.h>

namespace hwt {

AutocastState AutocastState::current() {
  AutocastState s;
  s.cpu_enabled = at::autocast::is_autocast_enabled(at::kCPU);
  s.cuda_enabled = at::autocast::is_autocast_enabled(at::kCUDA);
  s.cpu_dtype = at::autocast::get_autocast_dtype(at::kCPU);
  s.cuda_dtype = at::autocast::get_autocast_dtype(at::kCUDA);
  return s;
}

void AutocastState::apply() const {
  at::autocast::set_autocast_enabled(at::kCPU, cpu_enabled);
  at::autocast::set_autocast_enabled(at::kCUDA, cuda_enabled);
  at::autocast::set_autocast_dtype(at::kCPU, cpu_dtype);
  at::autocast::set_autocast_dtype(at::kCUDA, cuda_dtype);
}

AutocastStateGuard::AutocastStateGuard(const AutocastState& state)
    : previous_(AutocastState::current()),
      previous_cache_enabled_(at::autocast::is_autocast_cache_enabled()) {
  at::autocast::set_autocast_cache_enabled(false);
  state.apply();
}

AutocastStateGuard::~AutocastStateGuard() {
  previous_.apply();
  at::autocast::set_autocast_cache_enabled(previous_cache_enabled_);
}

}  // namespace hwt
