// Learning-rate schedules: linear warmup from 0, then cosine (or linear) decay to min_lr, or
// constant. LibTorch has only StepLR and ReduceLROnPlateau, so these are written here.
#pragma once
#include <cstdint>

#include "hwtrain/train/train_config.h"

namespace hwt {

// The learning rate of optimizer step `step` (0-based), before any plateau scaling.
double scheduled_lr(const TrainConfig& config, int64_t step);

}  // namespace hwt
