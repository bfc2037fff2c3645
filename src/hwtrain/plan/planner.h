// The planner: hardware profile + the user's intent -> Plan. Every decision carries its reason, and
// every value the user set explicitly (an engaged optional of PlanIntent) wins over the planner's
// choice; where a user's choice cannot run here the plan says so and takes a stated fallback. The
// decisions themselves are plan/decisions.h; make_plan runs them in one fixed order.
#pragma once
#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/plan/memory_model.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/plan/plan_intent.h"

namespace hwt {

struct PlanContext {
  int64_t world_size = 1;  // data-parallel ranks
  int64_t local_rank = 0;  // picks the GPU
  bool paper = false;      // planning for a described machine, not this process
  int64_t model_parallel = 1;  // ranks per model replica (tensor x pipeline parallel), sharing the cores too
  int64_t pipeline_parallel = 1;  // of which pipeline stages
  int64_t ranks_per_node = 0;  // the run's processes on this machine; 0 = all (world_size x model_parallel)
};

// `intent.model.vocab_size` must be resolved (non-zero). Throws HardwareError when the model
// cannot fit even at micro-batch 1 with full activation checkpointing (the message says how much
// memory it needs and what would make it fit), ConfigError for impossible explicit settings.
// (A RunConfig is planned through run/run_bindings.h, which reads it into a PlanIntent.)
Plan make_plan(const HardwareProfile& hw, const PlanIntent& intent, const PlanContext& context = {});

// The first decision alone: the device make_plan would choose (a distributed run needs it to
// create its process group, NCCL or Gloo, before the rest can be planned). Cheap: no probes.
c10::Device plan_device(const HardwareProfile& hw, const PlanIntent& intent, const PlanContext& context = {});

// The vocabulary the model uses for a tokenizer of `tokenizer_vocab` ids: rounded up to a
// multiple of 64 (faster matmuls), unless model.vocab_size is set.
int64_t resolve_vocab_size(const ModelConfig& model, int64_t tokenizer_vocab);

}  // namespace hwt
