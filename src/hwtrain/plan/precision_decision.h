// The precision decision: fp32, bf16 or fp16 autocast for the plan's device, from the ISA or the
// GPU's compute capability and the measured GEMM rates; a user's dtype wins (with a warning and a
// stated fallback where the hardware cannot run it). Part of the planner (plan/planner.h).
#pragma once
#include "hwtrain/config/run_config.h"
#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/plan/plan.h"

namespace hwt {

// Sets p.precision, p.hardware_bf16/fp16 and records the decision. `gpu`: the plan's GPU, or null
// when p.device is the CPU.
void decide_precision(Plan& p, const HardwareProfile& hw, const RunConfig& c, const GpuInfo* gpu);

}  // namespace hwt
