#include "hwtrain/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace hwt {

double scheduled_lr(const TrainConfig& c, int64_t step) {
  if (c.lr_schedule == LrSchedule::kConstant) {
    return step < c.warmup_steps ? c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps) : c.lr;
  }
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  const int64_t decay_end = c.decay_steps > 0 ? c.decay_steps : c.max_steps;
  if (step >= decay_end) return c.min_lr_value();
  const double span = static_cast<double>(std::max<int64_t>(1, decay_end - c.warmup_steps));
  const double progress = static_cast<double>(step - c.warmup_steps) / span;  // 0 -> 1
  const double coefficient = c.lr_schedule == LrSchedule::kLinear ? 1.0 - progress : 0.5 * (1.0 + std::cos(M_PI * progress));
  return c.min_lr_value() + coefficient * (c.lr - c.min_lr_value());
}

}  // namespace hwt
