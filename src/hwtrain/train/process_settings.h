// The plan's process-wide LibTorch settings, applied before any model work: intra-op threads,
// deterministic algorithms, and on a GPU TF32 and cuDNN's autotuner. Applied by
// HardwareAwareOptimizer::apply_optimizations and by tests that train on a device directly.
#pragma once
#include "hwtrain/plan/plan.h"

namespace hwt {

void apply_process_settings(const Plan& plan);

}  // namespace hwt
