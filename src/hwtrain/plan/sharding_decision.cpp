// What the data-parallel ranks shard (plan.h's Sharding) and the AdamW moments' dtype: the user's
// dist.sharding and optimization.optimizer_state_dtype / _device, or under "auto" the least sharding
// whose per-rank memory fits the budget with fp32 moments, else with 8-bit ones, else (on a GPU) with
// the moments offloaded to host memory (plan/decisions.h). The
// reason lists the model states per rank of every layout, as the ZeRO paper's Figure 1 counts them.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/plan/decisions.h"

namespace hwt {

namespace {

constexpr Sharding kLayouts[] = {Sharding::None, Sharding::Zero1, Sharding::Zero2, Sharding::Zero3};

// At micro-batch 1 with every block recomputed: the smallest step the later decisions can choose.
MemoryQuery smallest_step(const Plan& p, const PlanInputs& in, Sharding s) {
  MemoryQuery q = memory_query(p, in, 1, 1);
  q.sharding = s;
  return q;
}

std::string layouts_per_rank(const Plan& p, const PlanInputs& in) {
  std::vector<std::string> parts;
  for (Sharding s : kLayouts) {
    const double states = rank_memory(in, smallest_step(p, in, s)).model_states();
    parts.push_back(std::string(sharding_name(s)) + " " + format_bytes(states));
  }
  const std::string over = in.ctx.model_parallel > 1 ? " replicas" + fixed_mesh_text(in) : " ranks";
  return "model states per rank over " + std::to_string(in.ctx.world_size) + over + ": " + join(parts);
}

bool shards_gradients(Sharding s) { return s == Sharding::Zero2 || s == Sharding::Zero3; }

// What zero2/zero3 cannot run with (refuse_impossible says why).
bool gradient_sharding_excluded(const PlanInputs& in) { return in.want.auto_batch_size; }

// The least layout that fits with the plan's moments (none when nothing does); one rank has one.
std::optional<Sharding> least_that_fits(const Plan& p, const PlanInputs& in) {
  for (Sharding s : kLayouts) {
    if (in.ctx.world_size == 1 && s != Sharding::None) break;
    if (shards_gradients(s) && gradient_sharding_excluded(in)) continue;
    if (rank_memory(in, smallest_step(p, in, s)).total() <= p.memory_budget_bytes) return s;
  }
  return std::nullopt;
}

void refuse_impossible(const PlanInputs& in, Sharding s) {
  if (shards_gradients(s) && in.want.auto_batch_size) {
    throw ConfigError(std::string("optimization.auto_batch_size probes the micro-batch with whole parameters, "
                                  "gradients and moments, which dist.sharding = ") +
                      sharding_name(s) + " exists to avoid; set train.micro_batch_size instead");
  }
}

void decide_state_dtype(Plan& p, const PlanInputs& in) {
  p.optimizer_state_dtype = in.want.optimizer_state_dtype.value_or(StateDtype::Fp32);
  p.optimizer_state_device = in.want.optimizer_state_device.value_or(StateDevice::Device);
}

// The least layout that fits, trying what the user left open in order of cost: fp32 moments on the
// device, then 8-bit moments, then (on a GPU) fp32 moments offloaded to host memory. Returns the
// layout and what it took ("" or "; only with ...").
std::pair<std::optional<Sharding>, std::string> least_with_fallbacks(Plan& p, const PlanInputs& in) {
  std::optional<Sharding> fit = least_that_fits(p, in);
  if (!fit && !in.want.optimizer_state_dtype) {
    p.optimizer_state_dtype = StateDtype::Int8;
    fit = least_that_fits(p, in);
    if (fit) return {fit, "; only with 8-bit AdamW moments"};
    p.optimizer_state_dtype = StateDtype::Fp32;
  }
  if (!fit && !in.want.optimizer_state_device && p.on_gpu() && in.want.optimizer_step != OptimizerStep::InBackward) {
    p.optimizer_state_device = StateDevice::Host;
    fit = least_that_fits(p, in);
    if (fit) return {fit, "; only with the AdamW moments offloaded to host memory"};
    p.optimizer_state_device = StateDevice::Device;
  }
  return {fit, ""};
}

}  // namespace

void decide_sharding(Plan& p, const PlanInputs& in) {
  const int64_t n = in.ctx.world_size;
  decide_state_dtype(p, in);
  std::string reason;
  if (in.want.sharding) {
    p.sharding = *in.want.sharding;
    reason = "dist.sharding set by user";
    if (n == 1 && p.sharding != Sharding::None) {
      p.warnings.push_back(std::string("dist.sharding = ") + sharding_name(p.sharding) +
                           " needs several ranks; one process keeps everything whole");
      p.sharding = Sharding::None;
      reason = "one rank: nothing to shard (dist.sharding set by user)";
    }
  } else if (n == 1) {
    p.sharding = Sharding::None;
    reason = "one rank: nothing to shard" + least_with_fallbacks(p, in).second;
  } else {
    const auto [fit, took] = least_with_fallbacks(p, in);
    p.sharding = fit.value_or(gradient_sharding_excluded(in) ? Sharding::Zero1 : Sharding::Zero3);
    reason = std::string(fit ? "the least sharding that fits" : "nothing fits") + " the budget of " +
             format_bytes(p.memory_budget_bytes) + " at micro-batch 1 with recomputation";
    if (fit && *fit != Sharding::None) {  // why the layout before it does not do
      const Sharding before = kLayouts[static_cast<int>(*fit) - 1];
      reason += std::string(" (") + sharding_name(before) + " would need " +
                format_bytes(rank_memory(in, smallest_step(p, in, before)).total()) + ")";
    }
    reason += took;
  }
  refuse_impossible(in, p.sharding);
  p.decide("sharding", sharding_name(p.sharding), reason + (n > 1 ? "; " + layouts_per_rank(p, in) : ""));
}


void decide_gradient_reduce(Plan& p, const PlanInputs& in) {
  const bool sharded_grads = p.sharding == Sharding::Zero2 || p.sharding == Sharding::Zero3;
  p.gradient_reduce = sharded_grads ? in.want.reduce_dtype : ReduceDtype::Fp32;
  if (in.want.reduce_dtype == ReduceDtype::Bf16 && !sharded_grads) {
    p.warnings.push_back(std::string("dist.reduce_dtype = bf16 applies to zero2/zero3; this plan's sharding is ") +
                         sharding_name(p.sharding) + ", whose gradients are reduced in fp32");
  }
  if (!sharded_grads) return;
  p.decide("gradient_reduce", enum_name(p.gradient_reduce),
           p.gradient_reduce == ReduceDtype::Bf16
               ? "dist.reduce_dtype set by user: half the reduce-scatter bytes; each averaged shard is rounded to "
                 "bf16 before the fp32 gradient shard adds it"
               : "dist.reduce_dtype: the gradients reduce-scattered in fp32 (bf16 halves the bytes)");
}

// Whether the ranks build the model whole and then shard or cut it, or with placeholders that each
// rank fills with only what it keeps (model/deferred_init.h): a unit at a time into its ZeRO-2/3
// shards, or its tensor-parallel cut and pipeline stage's weights. The same initial values either way.
void decide_model_init(Plan& p, const PlanInputs& in) {
  const bool sharded_grads = p.sharding == Sharding::Zero2 || p.sharding == Sharding::Zero3;
  const int64_t pp = std::max(in.ctx.pipeline_parallel, p.layout ? p.layout->pipeline_parallel : int64_t{1});
  const int64_t tp = p.layout ? p.layout->tensor_parallel : in.ctx.model_parallel / std::max<int64_t>(1, in.ctx.pipeline_parallel);
  if (!sharded_grads && tp == 1 && pp == 1) return;  // one whole build on every rank, nothing to say
  p.deferred_init = in.want.deferred_init;
  const std::string whole = format_bytes(4.0 * static_cast<double>(gpt_num_parameters(in.want.model)));
  if (!p.deferred_init) {
    p.decide("model_init", "whole, then split",
             "dist.deferred_init = false set by user (" + whole + " of fp32 weights per rank at start-up)");
    return;
  }
  std::vector<std::string> keeps;
  if (pp > 1) keeps.push_back("its pipeline stage's weights");
  if (tp > 1) keeps.push_back("its tensor-parallel cut of each weight");
  if (sharded_grads) keeps.push_back("one unit at a time into its " + std::string(sharding_name(p.sharding)) + " shards");
  p.decide("model_init", "with placeholders, each rank filling what it keeps",
           "each rank builds the model with placeholders and fills " + join(keeps, ", ") +
               " (the same values as a whole build): never the " + whole + " of fp32 weights at once");
}

}  // namespace hwt
