// The RunConfig read into each area's typed inputs, in one place: the planner's PlanIntent (a
// std::optional engaged for each setting the user made), the Trainer's TrainerOptions, and the two
// planner entry points that take a whole config. Below this area nothing sees a RunConfig.
#pragma once
#include "hwtrain/plan/planner.h"
#include "hwtrain/run/run_config.h"
#include "hwtrain/train/trainer_options.h"

namespace hwt {

// `config.model.vocab_size` must be resolved (non-zero).
PlanIntent plan_intent(const RunConfig& config);
Plan make_plan(const HardwareProfile& hw, const RunConfig& config, const PlanContext& context = {});
c10::Device plan_device(const HardwareProfile& hw, const RunConfig& config, const PlanContext& context = {});

TrainerOptions trainer_options(const RunConfig& config);

}  // namespace hwt
