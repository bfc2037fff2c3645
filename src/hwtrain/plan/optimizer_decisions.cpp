// Where and when the optimizer steps: the AdamW kernel, the step after backward or in backward,
// and where its moments live (plan/decisions.h).
#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/plan/decisions.h"

namespace hwt {

// The config refused the settings that conflict with the optimizer in backward everywhere; these
// depend on the launch and the planned precision.
void check_optimizer_step(const Plan& p, const PlanInputs& in) {
  if (in.want.optimizer_step != OptimizerStep::InBackward) return;
  if (in.ctx.world_size > 1) {
    throw ConfigError("optimization.optimizer_in_backward = true cannot run on " + std::to_string(in.ctx.world_size) +
                      " ranks: data parallelism averages every gradient across ranks before the update; "
                      "launch one process or set it to false");
  }
  if (p.precision == Precision::Fp16) {
    throw ConfigError("optimization.optimizer_in_backward = true cannot run with the plan's fp16 autocast: loss "
                      "scaling must see every gradient before it may skip a step; set "
                      "optimization.mixed_precision_dtype = fp32 or optimization.optimizer_in_backward = false");
  }
}

namespace {

void decide_optimizer_step(Plan& p, const PlanInputs& in) {
  p.optimizer_step = in.want.optimizer_step;
  const bool in_backward = p.optimizer_in_backward();
  MemoryQuery here = memory_query(p, in, p.micro_batch_size, p.checkpoint_every), there = here;
  there.optimizer_in_backward = !in_backward;
  const double held = estimate_memory(here).gradients, other = estimate_memory(there).gradients;
  p.decide("optimizer_step", in_backward ? "in backward, per parameter; gradients freed as made" : "after backward",
           in_backward ? "optimization.optimizer_in_backward set by user: gradients peak at " + format_bytes(held) +
                             " instead of " + format_bytes(other)
           : in.want.clips_by_global_norm ? "clipping by the global norm (train.grad_clip) needs every gradient first"
                                          : "optimization.optimizer_in_backward = true would hold " + format_bytes(other) +
                                                " of gradients instead of " + format_bytes(held));
}

// Host-resident moments are not implemented yet: the plan says so and keeps them with the weights,
// rather than writing a placement into plan.json that nothing carries out.
void decide_state_device(Plan& p, const PlanInputs& in) {
  p.optimizer_state_device = StateDevice::Device;
  if (in.want.optimizer_state_device == StateDevice::Host) {
    p.warnings.push_back("optimization.optimizer_state_device = cpu is not implemented in this version: the "
                         "optimizer moments stay " + std::string(p.on_gpu() ? "on the GPU" : "in host memory") +
                         " with the weights");
  }
  const bool sharded = p.sharding != Sharding::None;
  const bool int8 = p.optimizer_state_dtype == StateDtype::Int8;
  const std::string dtype = int8 ? "8-bit block-wise moments, " : "fp32 moments, ";
  p.decide("optimizer_state",
           dtype + (sharded ? "sharded over " + std::to_string(p.world_size) + " ranks (" +
                                  sharding_name(p.sharding) + ")"
                            : std::string(p.on_gpu() ? "on the GPU" : "in host memory")),
           std::string(in.want.optimizer_state_dtype ? "optimization.optimizer_state_dtype set by user"
                       : int8                        ? "only 8-bit moments make the model fit"
                                                     : "fp32 moments fit") +
               (sharded ? "; dist.sharding (see the sharding line)" : ""));
}

}  // namespace

void decide_optimizer(Plan& p, const PlanInputs& in) {
  p.fused_optimizer = in.want.fused_optimizer.value_or(true);
  p.decide("optimizer", std::string(p.fused_optimizer ? "fused AdamW (at::_fused_adamw_)" : "AdamW (reference)"),
           in.want.fused_optimizer ? "set by user" : "one kernel for all parameters of a dtype");
  decide_optimizer_step(p, in);
  decide_state_device(p, in);
}

}  // namespace hwt
