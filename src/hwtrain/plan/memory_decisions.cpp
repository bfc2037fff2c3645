// What must fit the memory budget, cheapest saving first: the attention kernel, the LM head, then
// the micro-batch with activation recomputation and accumulation, and the predicted peak
// (plan/decisions.h). Each decision asks the memory model (plan/memory_model.h) about the plan so
// far, varying only what it decides.
#include <algorithm>
#include <cmath>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/model/lm_head_loss.h"
#include "hwtrain/plan/decisions.h"
#include "hwtrain/plan/layout_cost.h"

namespace hwt {

namespace {

double available_bytes(const Plan& p, const PlanInputs& in) {
  if (const GpuInfo* gpu = plan_gpu(p, in)) {
    return static_cast<double>(gpu->free_memory_bytes > 0 ? gpu->free_memory_bytes : gpu->total_memory_bytes);
  }
  return static_cast<double>(in.hw.memory.effective_available_bytes);
}

// How the budget was reached: "75% of 22.2 GiB / 4 local ranks".
std::string budget_source(const Plan& p, const PlanInputs& in) {
  const int64_t sharing = ranks_sharing_host(p, in);
  return format_number("%.3g", in.want.memory_threshold * 100) + "% of " + format_bytes(available_bytes(p, in)) +
         (sharing > 1 ? " / " + std::to_string(sharing) + " local ranks" : "");
}

bool fits(const Plan& p, const PlanInputs& in, int64_t micro, int64_t every) {
  return rank_memory(in, memory_query(p, in, micro, every)).total() <= p.memory_budget_bytes;
}

// The micro-batch the user asked for, or the whole batch of this rank up to max_batch_size (with
// the optimizer in backward a step is one micro-batch: the whole batch of this rank).
// The rows per rank one micro-batch should carry: all of them, or with train.grad_accum_steps set,
// that share of them (so that micro-batch x accumulation reaches the target, not a multiple of it).
int64_t per_micro_step_target(const PlanInputs& in) {
  const int64_t rows = per_rank_target(in);
  if (!in.want.grad_accum_steps) return rows;
  return std::max<int64_t>(1, (rows + *in.want.grad_accum_steps - 1) / *in.want.grad_accum_steps);
}

int64_t wanted_micro_batch(const PlanInputs& in) {
  if (in.want.micro_batch_size) return *in.want.micro_batch_size;
  if (in.want.optimizer_step == OptimizerStep::InBackward) return per_rank_target(in);
  return std::min<int64_t>(per_micro_step_target(in), in.want.max_batch_size);
}

struct BatchChoice {
  int64_t micro = 1, every = 0;
  std::string micro_reason, every_reason = "activations fit in memory without recomputation";
};

// Tokens per micro-batch from which a GPU is busy: recomputation or the chunked head is not worth a
// larger micro-batch than that.
constexpr int64_t kGpuFillingTokens = 8192;

// A micro-batch fixed by the user (or by the optimizer in backward): recomputation only if needed.
BatchChoice fixed_micro_batch(const Plan& p, const PlanInputs& in, BatchChoice b) {
  b.micro = wanted_micro_batch(in);
  b.micro_reason = in.want.micro_batch_size
                       ? "train.micro_batch_size set by user"
                       : "optimization.optimizer_in_backward: one micro-batch per step, the whole batch of this rank";
  if (!in.want.checkpoint_every && !fits(p, in, b.micro, 0) && fits(p, in, b.micro, 1)) {
    b.every = 1;
    b.every_reason = "micro-batch " + std::to_string(b.micro) + " fits the memory budget only with recomputation";
  }
  return b;
}

// On a fixed pipeline mesh whose accumulation the planner chooses: whether `micro` leaves the stages
// micro-batches to overlap, at least pp a step and a multiple of pp when interleaved (the rule
// cli/parallel_setup.h's check_plan_for_mesh holds a run to).
bool feeds_pipeline(const PlanInputs& in, int64_t micro) {
  const int64_t pp = in.ctx.pipeline_parallel;
  if (pp <= 1 || in.ctx.model_parallel <= 1 || in.want.grad_accum_steps) return true;
  const int64_t per_rank = per_rank_target(in), accum = (per_rank + micro - 1) / micro;
  return accum >= pp && (in.want.pipeline_chunks.value_or(1) == 1 || accum % pp == 0);
}

// The largest power-of-two fraction of the wanted micro-batch that fits (and feeds a fixed
// pipeline); recomputation where the model does not fit without it, or where it lets a micro-batch
// at least twice as large fit (on a GPU only while the micro-batch is under kGpuFillingTokens).
BatchChoice searched_micro_batch(const Plan& p, const PlanInputs& in, BatchChoice b) {
  const bool every_free = !in.want.checkpoint_every;
  int64_t start = std::min<int64_t>(per_micro_step_target(in), in.want.max_batch_size);
  while (start > 1 && !feeds_pipeline(in, start)) start /= 2;
  if (const auto fastest = fastest_pipeline_micro_batch(p, in, start)) {  // a fixed pipeline's
    b.micro = fastest->micro;
    b.micro_reason = fastest->reason;
    if (every_free) b.every = fastest->every, b.every_reason = fastest->every_reason;
    return b;
  }
  b.micro = start;
  while (b.micro > 1 && !fits(p, in, b.micro, b.every)) b.micro /= 2;
  if (every_free && !fits(p, in, b.micro, 0)) {
    b.every = 1;
    b.every_reason = "the model does not fit at micro-batch 1 without recomputation";
  }
  b.micro_reason = fits(p, in, b.micro, b.every) ? "largest that reaches the global batch under the memory budget"
                                                 : "smallest possible";
  if (in.ctx.pipeline_parallel > 1 && in.ctx.model_parallel > 1 && !in.want.grad_accum_steps) {
    b.micro_reason += " and gives the " + std::to_string(in.ctx.pipeline_parallel) + " pipeline stages at least as "
                      "many micro-batches a step";
  }
  // On a GPU a micro-batch of kGpuFillingTokens already fills the device: a larger one gains a few
  // percent (GPT-2 124M on an H100: 16 -> 64 sequences of 1024, +13% tokens/s) where recomputing
  // every block costs about a third more compute, so recomputation is not bought for it.
  const bool filled = p.on_gpu() && b.micro * in.want.model.block_size >= kGpuFillingTokens;
  if (every_free && b.every == 0 && b.micro < per_micro_step_target(in) && !filled) {
    int64_t with_ckpt = start;
    while (with_ckpt > b.micro && !fits(p, in, with_ckpt, 1)) with_ckpt /= 2;
    if (with_ckpt >= 2 * b.micro) {
      b.every = 1;
      b.every_reason = "recomputation lets micro-batch " + std::to_string(with_ckpt) + " fit instead of " +
                       std::to_string(b.micro);
      b.micro = with_ckpt;
    }
  }
  return b;
}

// The fewest ranks over which ZeRO-3 fits the model at micro-batch 1 with recomputation (0: none
// up to 65536, the activations alone do not fit).
int64_t zero3_ranks_needed(const Plan& p, const PlanInputs& in) {
  MemoryQuery q = memory_query(p, in, 1, 1);
  q.sharding = Sharding::Zero3;
  for (int64_t n = std::max<int64_t>(2, in.ctx.world_size); n <= 65536; n *= 2) {
    q.world_size = n;
    if (rank_memory(in, q).total() <= p.memory_budget_bytes) {
      int64_t lo = n / 2 + 1;  // the first power of two that fits; then the least count below it
      while (lo < n) {
        q.world_size = (lo + n) / 2;
        if (rank_memory(in, q).total() <= p.memory_budget_bytes) n = q.world_size; else lo = q.world_size + 1;
      }
      return n;
    }
  }
  return 0;
}

// Refuses a model that cannot fit at micro-batch 1 with full recomputation, or a batch the optimizer
// in backward must run whole and cannot fit; both name what would make it fit.
void refuse_unfittable(const Plan& p, const PlanInputs& in, const BatchChoice& b) {
  if (!fits(p, in, 1, 1) && !fits(p, in, b.micro, b.every)) {
    const MemoryEstimate e = rank_memory(in, memory_query(p, in, 1, 1));
    const double need = e.total();
    const int64_t ranks = p.on_gpu() ? zero3_ranks_needed(p, in) : 0;
    const int64_t per_replica = std::max<int64_t>(1, in.ctx.model_parallel);
    const std::string hint =
        ranks > 0 ? "shard the model states (dist.sharding = zero3) over at least " + std::to_string(ranks) +
                        (per_replica > 1 ? " replicas (" + std::to_string(ranks * per_replica) + " GPUs)" : " GPUs") +
                        ", or use a smaller model"
                  : "use a smaller model (model.n_layer / model.n_embd) or a machine with more memory";
    const std::string where = in.ctx.model_parallel > 1 ? fixed_mesh_text(in) : " per device";
    throw HardwareError("the model needs " + format_bytes(need) + where + " even at micro-batch 1 with full "
                        "activation checkpointing (" + e.breakdown() + "), but the budget is " +
                        format_bytes(p.memory_budget_bytes) + " (optimization.memory_threshold: " +
                        budget_source(p, in) + "); " + hint);
  }
  if (in.want.optimizer_step == OptimizerStep::InBackward && !in.want.micro_batch_size &&
      !fits(p, in, b.micro, b.every)) {
    throw ConfigError("optimization.optimizer_in_backward = true runs the whole batch of this rank (" +
                      std::to_string(b.micro) + " sequences) as one micro-batch, which needs " +
                      format_bytes(rank_memory(in, memory_query(p, in, b.micro, b.every)).total()) +
                      (b.every > 0 ? " even with recomputation" : "") + ", over the budget of " +
                      format_bytes(p.memory_budget_bytes) +
                      "; set a smaller optimization.target_batch_size or optimization.optimizer_in_backward = false");
  }
}

void decide_accumulation(Plan& p, const PlanInputs& in) {
  const int64_t per_rank = per_rank_target(in);
  p.grad_accum_steps = in.want.grad_accum_steps ? *in.want.grad_accum_steps
                                                : std::max<int64_t>(1, (per_rank + p.micro_batch_size - 1) / p.micro_batch_size);
  if (in.want.optimizer_step == OptimizerStep::InBackward && p.grad_accum_steps > 1) {
    throw ConfigError("optimization.optimizer_in_backward = true needs one micro-batch per step, but micro-batch " +
                      std::to_string(p.micro_batch_size) + " takes " + std::to_string(p.grad_accum_steps) +
                      " accumulation steps to reach " + std::to_string(per_rank) +
                      " sequences per rank; set train.micro_batch_size = " + std::to_string(per_rank) +
                      " or a smaller optimization.target_batch_size");
  }
}

}  // namespace

MemoryQuery memory_query(const Plan& p, const PlanInputs& in, int64_t micro, int64_t every) {
  MemoryQuery q;
  q.model = in.want.model;
  q.precision = p.precision;
  q.on_gpu = p.on_gpu();
  q.world_size = in.ctx.world_size;
  q.sharding = p.sharding;
  q.int8_moments = p.optimizer_state_dtype == StateDtype::Int8;
  q.offload_optimizer = p.optimizer_state_device == StateDevice::Host;
  q.optimizer_in_backward = in.want.optimizer_step == OptimizerStep::InBackward;
  q.attention = p.attention;
  q.fused_lm_head_loss = p.fused_lm_head_loss;
  q.micro_batch_size = micro;
  q.checkpoint_every = every;
  return q;
}

std::optional<ParallelLayout> fixed_mesh(const PlanInputs& in) {
  if (in.ctx.model_parallel <= 1) return std::nullopt;
  ParallelLayout l;
  l.pipeline_parallel = std::max<int64_t>(1, in.ctx.pipeline_parallel);
  l.tensor_parallel = in.ctx.model_parallel / l.pipeline_parallel;
  l.data_parallel = in.ctx.world_size;
  l.pipeline_chunks = in.want.pipeline_chunks.value_or(1);
  return l;
}

MemoryEstimate rank_memory(const PlanInputs& in, const MemoryQuery& q) {
  const std::optional<ParallelLayout> mesh = fixed_mesh(in);
  if (!mesh) return estimate_memory(q);
  ParallelLayout l = *mesh;
  l.data_parallel = q.world_size;  // the query's replicas (zero3_ranks_needed varies them)
  l.sharding = q.sharding;
  l.micro_batch_size = q.micro_batch_size;
  l.checkpoint_every = q.checkpoint_every;
  const int64_t per_rank = per_rank_target(in);  // decide_accumulation's count for this micro-batch
  l.num_micro_batches = in.want.grad_accum_steps.value_or(
      std::max<int64_t>(1, (per_rank + q.micro_batch_size - 1) / q.micro_batch_size));
  return split_memory(q, l, in.want.sequence_parallel);
}

std::string fixed_mesh_text(const PlanInputs& in) {
  const std::optional<ParallelLayout> mesh = fixed_mesh(in);
  if (!mesh) return "";
  return " on each rank of the fixed tp" + std::to_string(mesh->tensor_parallel) + " x pp" +
         std::to_string(mesh->pipeline_parallel) + " mesh";
}

int64_t target_batch_size(const PlanInputs& in) {
  return in.want.target_batch_size > 0 ? in.want.target_batch_size : in.want.rows_per_rank * in.ctx.world_size;
}

int64_t per_rank_target(const PlanInputs& in) { return std::max<int64_t>(1, target_batch_size(in) / in.ctx.world_size); }

// On the CPU every local process trains in the same memory, so each plans with its share of the
// threshold (ranks_sharing_host).
void decide_memory_budget(Plan& p, const PlanInputs& in) {
  const int64_t sharing = ranks_sharing_host(p, in);
  p.memory_budget_bytes = in.want.memory_threshold * available_bytes(p, in) / static_cast<double>(sharing);
}

// On CPU the GEMM kernel beats the flash-attention one per layer by 1.5-1.6x in bf16 and ties it or
// wins by up to 1.1x in fp32 (bench/model_attention_bench.cpp), but keeps its probabilities, so it
// is chosen where they fit at the wanted micro-batch without recomputation.
void decide_attention(Plan& p, const PlanInputs& in) {
  const int64_t wanted = wanted_micro_batch(in);
  std::string reason;
  if (in.want.attention) {
    p.attention = *in.want.attention;
    reason = std::string("model.attention = ") + to_string(p.attention) + " set by user";
  } else if (p.on_gpu()) {
    p.attention = AttentionKernel::Sdpa;
    reason = "fused kernel of LibTorch 2.x (flash attention on sm80+); no T x T score matrix is stored";
  } else if (in.want.model.dropout > 0) {
    p.attention = AttentionKernel::Sdpa;
    reason = "flash-attention CPU kernel: model.dropout = " + format_number("%.1f", in.want.model.dropout) +
             " and the faster GEMM kernel has no dropout";
  } else {
    MemoryQuery q = memory_query(p, in, wanted, 0);
    q.attention = AttentionKernel::Gemm;
    const double with_probabilities = rank_memory(in, q).total();
    const bool probabilities_fit = with_probabilities <= p.memory_budget_bytes;
    p.attention = probabilities_fit ? AttentionKernel::Gemm : AttentionKernel::Sdpa;
    reason = "micro-batch " + std::to_string(wanted) + " needs " + format_bytes(with_probabilities) +
             " with the GEMM kernel's kept probabilities; budget " + format_bytes(p.memory_budget_bytes) +
             (probabilities_fit ? ": fits, and it is faster than the flash-attention CPU kernel (1.5x per layer in bf16)"
                                : ": the flash-attention CPU kernel, which keeps none");
  }
  p.decide("attention",
           p.attention == AttentionKernel::Gemm   ? "batched GEMMs, hand-written backward"
           : p.attention == AttentionKernel::Math ? "math (cached causal mask)"
                                                  : "scaled_dot_product_attention",
           reason);
}

// The fused head drops the whole logits (two fp32 copies of tokens x vocab) but its chunked GEMMs
// ran 5-10% slower on CPU (docs/benchmarks.md), so by default it is the first memory saving used:
// when the logits of the wanted micro-batch do not fit beside the activations, before
// recomputation (which costs 17-29%) is considered.
std::string vocabulary_parallel_head(Plan& p, const PlanInputs& in, int64_t tensor_parallel) {
  p.fused_lm_head_loss = false;
  if (in.want.fused_lm_head_loss.value_or(false)) {
    p.warnings.push_back("optimization.fused_lm_head_loss = true does not apply with dist.tensor_parallel = " +
                         std::to_string(tensor_parallel) + ": the head is vocabulary-parallel, its logits split " +
                         "over the tensor group instead of chunked");
  }
  return "vocabulary-parallel over the tensor group: each rank holds " +
         std::to_string(in.want.model.vocab_size / tensor_parallel) + " of the logits' columns";
}

void decide_lm_head(Plan& p, const PlanInputs& in) {
  const int64_t wanted = wanted_micro_batch(in);
  const int64_t vocab = in.want.model.vocab_size;
  const std::optional<ParallelLayout> mesh = fixed_mesh(in);
  const int64_t tp = mesh ? mesh->tensor_parallel : 1;
  std::string reason;
  if (tp > 1) {
    reason = vocabulary_parallel_head(p, in, tp);
  } else if (in.want.fused_lm_head_loss) {
    p.fused_lm_head_loss = *in.want.fused_lm_head_loss;
    reason = "optimization.fused_lm_head_loss set by user";
  } else {
    MemoryQuery q = memory_query(p, in, wanted, 0);
    q.fused_lm_head_loss = false;
    const double plain = rank_memory(in, q).total();
    q.fused_lm_head_loss = true;
    const double fused = rank_memory(in, q).total();
    const bool plain_fits = plain <= p.memory_budget_bytes;
    p.fused_lm_head_loss = !plain_fits && fused < 0.95 * plain;
    reason = "micro-batch " + std::to_string(wanted) + " needs " + format_bytes(plain) + " with the whole " +
             std::to_string(vocab) + "-way logits, " + format_bytes(fused) + " chunked; budget " +
             format_bytes(p.memory_budget_bytes) +
             (plain_fits ? ": fits, and the plain head is faster"
                         : p.fused_lm_head_loss ? ": chunked first, before recomputation" : ": chunking would save under 5%");
    // On a GPU a smaller micro-batch that still fills it costs less than the chunks' small GEMMs.
    const int64_t filling = std::min<int64_t>(wanted, std::max<int64_t>(1, kGpuFillingTokens / in.want.model.block_size));
    const bool micro_fixed = in.want.micro_batch_size || in.want.optimizer_step == OptimizerStep::InBackward;
    if (p.fused_lm_head_loss && p.on_gpu() && filling < wanted && !micro_fixed) {  // the search may shrink it
      q = memory_query(p, in, filling, 0);
      q.fused_lm_head_loss = false;
      if (rank_memory(in, q).total() <= p.memory_budget_bytes) {
        p.fused_lm_head_loss = false;
        reason += "; but micro-batch " + std::to_string(filling) + " fills the GPU and fits with them: a smaller "
                  "micro-batch, not the chunks' small GEMMs";
      }
    }
  }
  p.decide("lm_head_loss",
           p.fused_lm_head_loss ? "fused, chunks of " + std::to_string(lm_head_loss_chunk_tokens(vocab)) + " tokens"
                                : std::string("linear + cross_entropy"),
           reason);
}

void decide_batch_and_checkpointing(Plan& p, const PlanInputs& in) {
  BatchChoice b;
  if (in.want.checkpoint_every) {
    b.every = *in.want.checkpoint_every;
    b.every_reason = "optimization.checkpoint_every = " + std::to_string(b.every) + " set by user";
  }
  const bool micro_fixed = in.want.micro_batch_size || in.want.optimizer_step == OptimizerStep::InBackward;
  b = micro_fixed ? fixed_micro_batch(p, in, b) : searched_micro_batch(p, in, b);
  refuse_unfittable(p, in, b);
  p.checkpoint_every = b.every;
  p.decide("activation_checkpointing",
           b.every == 0 ? "off" : b.every == 1 ? "every block" : "every " + std::to_string(b.every) + " blocks",
           b.every_reason);
  p.micro_batch_size = b.micro;
  decide_accumulation(p, in);
  p.decide("micro_batch_size", std::to_string(b.micro), b.micro_reason);
  const int64_t target = target_batch_size(in);
  std::string accum_reason = "global batch " + std::to_string(p.global_batch_size()) + " sequences = " +
                             std::to_string(b.micro) + " x " + std::to_string(p.grad_accum_steps) + " x " +
                             std::to_string(in.ctx.world_size) + " ranks";
  if (p.global_batch_size() != target) accum_reason += " (target " + std::to_string(target) + " rounded up)";
  p.decide("grad_accum_steps", std::to_string(p.grad_accum_steps), accum_reason);
  p.auto_batch_size = in.want.auto_batch_size;
}

void decide_memory(Plan& p, const PlanInputs& in) {
  const MemoryEstimate e = rank_memory(in, memory_query(p, in, p.micro_batch_size, p.checkpoint_every));
  p.predicted_peak_bytes = e.total();
  const std::string split = in.ctx.model_parallel > 1 ? "; the stage that needs the most" + fixed_mesh_text(in) +
                                                            ", its terms split by tensor parallelism and cut by stage"
                                                      : "";
  p.decide("memory", format_bytes(e.total()) + " predicted peak",
           "budget " + format_bytes(p.memory_budget_bytes) + " = " + budget_source(p, in) + "; " + e.breakdown() +
               split +
               (in.want.model.is_llama() ? " (llama: activations counted, within 14% of CPU measurements and "
                                           "2% of one H100 run, 153M at micro-batch 32)"
                                         : ""));
  if (e.total() > p.memory_budget_bytes) {
    p.warnings.push_back("predicted peak " + format_bytes(e.total()) + " exceeds the memory budget " +
                         format_bytes(p.memory_budget_bytes) + " with the settings given");
  }
}

}  // namespace hwt
