#include "hwtrain/plan/planner.h"

#include "hwtrain/core/error.h"
#include "hwtrain/plan/decisions.h"

namespace hwt {

int64_t resolve_vocab_size(const ModelConfig& model, int64_t tokenizer_vocab) {
  if (model.vocab_size > 0) {
    if (model.vocab_size < tokenizer_vocab) {
      throw ConfigError("model.vocab_size = " + std::to_string(model.vocab_size) +
                        " is smaller than the tokenizer's vocabulary of " + std::to_string(tokenizer_vocab) +
                        "; set it to at least that, or 0 to take the tokenizer's");
    }
    return model.vocab_size;
  }
  return (tokenizer_vocab + 63) / 64 * 64;
}

c10::Device plan_device(const HardwareProfile& hw, const PlanIntent& intent, const PlanContext& context) {
  const PlanInputs in{hw, intent, context};
  Plan p;
  p.world_size = context.world_size;
  decide_device(p, in);
  return p.device;
}

// The order of the decisions, each reading only what the ones before it decided:
//   1. device: everything else depends on CPU or GPU
//   2. precision (and loss scaling), then bf16 weights: the memory terms and the kernels depend on it
//   3. the optimizer placements that the launch and the precision rule out, refused before any work
//   4. threads
//   5. the memory budget; on several GPUs the parallel layout (tensor x pipeline x data), which when
//      it splits the model also decides what follows in 6 from its per-stage memory
//   6. what must fit the budget, cheapest saving first: the sharding, the attention kernel, the LM
//      head, then micro-batch with recomputation and accumulation, and the predicted peak
//   7. the optimizer (kernel, step placement, state device), which the memory terms assumed
//   8. the loader, the GPU's process settings, and the peak FLOP/s that MFU is measured against
Plan make_plan(const HardwareProfile& hw, const PlanIntent& intent, const PlanContext& context) {
  const PlanInputs in{hw, intent, context};
  Plan p;
  p.world_size = context.world_size;
  decide_device(p, in);
  decide_precision(p, in);
  check_optimizer_step(p, in);
  decide_weights(p, in);
  decide_threads(p, in);
  decide_memory_budget(p, in);
  decide_parallel_layout(p, in);
  if (plan_splits_model(p)) {
    apply_parallel_layout(p, in);
  } else {
    decide_sharding(p, in);
    decide_attention(p, in);
    decide_lm_head(p, in);
    decide_batch_and_checkpointing(p, in);
    decide_memory(p, in);
    match_data_parallel_layout(p, in);
    describe_fixed_layout(p, in);
  }
  decide_gradient_reduce(p, in);
  decide_model_init(p, in);
  decide_optimizer(p, in);
  decide_loader(p, in);
  decide_gpu_settings(p, in);
  decide_mfu_peak(p, in);
  return p;
}

}  // namespace hwt
