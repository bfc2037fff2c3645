#include "hwtrain/train/autocast.h"

#include <ATen/autocast_mode.h>

namespace hwt {

c10::ScalarType autocast_dtype(Precision p) {
  switch (p) {
    case Precision::Bf16: return torch::kBFloat16;
    case Precision::Fp16: return torch::kFloat16;
    case Precision::Fp32: return torch::kFloat32;
  }
  return torch::kFloat32;
}

AutocastGuard::AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled, bool cache)
    : device_type_(device_type),
      prev_enabled_(at::autocast::is_autocast_enabled(device_type)),
      prev_dtype_(at::autocast::get_autocast_dtype(device_type)),
      prev_cache_(at::autocast::is_autocast_cache_enabled()),
      active_(enabled && dtype != c10::ScalarType::Float) {
  if (!active_) return;
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, dtype);
  at::autocast::set_autocast_cache_enabled(cache);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, prev_enabled_);
  at::autocast::set_autocast_dtype(device_type_, prev_dtype_);
  at::autocast::set_autocast_cache_enabled(prev_cache_);
}

}  // namespace hwt
