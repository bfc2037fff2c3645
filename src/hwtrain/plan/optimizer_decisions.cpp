// Where and when the optimizer steps: the AdamW kernel, the step after backward or in backward,
// and where its moments live (plan/decisions.h).
#include <string>
#include <utility>

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
  const double held = rank_memory(in, here).gradients, other = rank_memory(in, there).gradients;
  p.decide("optimizer_step", in_backward ? "in backward, per parameter; gradients freed as made" : "after backward",
           in_backward ? "optimization.optimizer_in_backward set by user: gradients peak at " + format_bytes(held) +
                             " instead of " + format_bytes(other)
           : in.want.clips_by_global_norm ? "clipping by the global norm (train.grad_clip) needs every gradient first"
                                          : "optimization.optimizer_in_backward = true would hold " + format_bytes(other) +
                                                " of gradients instead of " + format_bytes(held));
}

// Where the moments live was settled with the sharding (decide_sharding: the user's choice, or host
// memory when only that makes the model fit). Returns the decision's value and what it costs, and
// refuses what the host placement cannot run with.
std::pair<std::string, std::string> state_place(const Plan& p, const PlanInputs& in) {
  if (p.optimizer_state_device == StateDevice::Device) return {p.on_gpu() ? "on the GPU" : "in host memory", ""};
  if (p.optimizer_in_backward()) {
    throw ConfigError("optimization.optimizer_state_device = cpu cannot run with optimization.optimizer_in_backward "
                      "= true (each gradient would wait for its own copy to the host); set one of them to its default");
  }
  if (!p.on_gpu()) {
    return {"offloaded to a separate host copy",
            "; the host is the device here: the fp32 masters and gradient staging add memory and save none"};
  }
  const double host = host_optimizer_bytes(memory_query(p, in, 1, 1));
  const double available = static_cast<double>(in.hw.memory.effective_available_bytes);
  if (host > available) {
    throw ConfigError("optimization.optimizer_state_device = cpu needs " + format_bytes(host) +
                      " of host memory per rank for the moments, fp32 masters and gradients; " + format_bytes(available) +
                      " is available: shard them (dist.sharding = zero2 or zero3) or set it to device");
  }
  return {"offloaded to pinned host memory", "; " + format_bytes(host) +
                                                 " of host memory per rank with the fp32 masters and gradient "
                                                 "staging; the update runs on the host"};
}

void decide_state_device(Plan& p, const PlanInputs& in) {
  const bool sharded = p.sharding != Sharding::None;
  const bool int8 = p.optimizer_state_dtype == StateDtype::Int8;
  const std::string dtype = int8 ? "8-bit block-wise moments, " : "fp32 moments, ";
  const auto [place, cost] = state_place(p, in);
  const bool host_auto = p.optimizer_state_device == StateDevice::Host && !in.want.optimizer_state_device;
  p.decide("optimizer_state",
           dtype + (sharded ? "sharded over " + std::to_string(p.world_size) + " ranks (" + sharding_name(p.sharding) +
                                  "), "
                            : std::string()) +
               place,
           std::string(in.want.optimizer_state_dtype ? "optimization.optimizer_state_dtype set by user"
                       : int8                        ? "only 8-bit moments make the model fit"
                                                     : "fp32 moments fit") +
               (in.want.optimizer_state_device ? "; optimization.optimizer_state_device set by user"
                : host_auto                    ? "; only offloading them makes the model fit"
                                               : "") +
               cost + (sharded ? "; dist.sharding (see the sharding line)" : ""));
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
