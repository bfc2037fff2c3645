#include "hwtrain/plan/planner.h"

#include <algorithm>
#include <cmath>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/model/lm_head_loss.h"
#include "hwtrain/plan/precision_decision.h"

namespace hwt {

namespace {

const GpuInfo* plan_gpu(const HardwareProfile& hw, const PlanContext& ctx) {
  if (hw.gpus.empty()) return nullptr;
  const size_t per_node = std::max<size_t>(1, hw.gpus.size() / std::max(1, hw.num_nodes));
  return &hw.gpus[static_cast<size_t>(ctx.local_rank) % per_node];
}

void decide_device(Plan& p, const HardwareProfile& hw, const RunConfig& c, const PlanContext& ctx) {
  const GpuInfo* gpu = plan_gpu(hw, ctx);
  const bool gpu_usable = gpu && (gpu->usable_by_torch || ctx.paper);
  const std::string& want = c.train.device;
  if (want == "cpu") {
    p.device = "cpu";
    p.decide("device", "cpu", "train.device set by user");
  } else if (want.rfind("cuda", 0) == 0) {
    if (!gpu_usable) {
      throw HardwareError("train.device = '" + want + "' but no CUDA GPU is usable here" +
                          std::string(hw.gpus.empty() ? " (none detected)" : " (LibTorch cannot use it)") +
                          "; set train.device=cpu or auto");
    }
    p.device = want == "cuda" ? "cuda:" + std::to_string(ctx.local_rank) : want;
    p.decide("device", p.device, "train.device set by user");
  } else if (gpu_usable) {
    p.device = "cuda:" + std::to_string(ctx.local_rank % static_cast<int64_t>(std::max<size_t>(1, hw.gpus.size())));
    p.decide("device", p.device + " (" + gpu->name + ")", "a CUDA GPU is available");
  } else {
    p.device = "cpu";
    p.decide("device", "cpu", hw.gpus.empty() ? "no CUDA GPU detected" : "GPU present but LibTorch cannot use it");
  }
}

}  // namespace

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

Plan make_plan(const HardwareProfile& hw, const RunConfig& c, const PlanContext& ctx) {
  Plan p;
  p.world_size = ctx.world_size;
  decide_device(p, hw, c, ctx);
  const bool on_gpu = p.device != "cpu";
  decide_precision(p, hw, c, on_gpu ? plan_gpu(hw, ctx) : nullptr);
  // The config refused the settings that conflict with it everywhere; these depend on the launch
  // and the hardware.
  const bool in_backward = c.optimization.optimizer_in_backward;
  if (in_backward && ctx.world_size > 1) {
    throw ConfigError("optimization.optimizer_in_backward = true cannot run on " + std::to_string(ctx.world_size) +
                      " ranks: data parallelism averages every gradient across ranks before the update; "
                      "launch one process or set it to false");
  }
  if (in_backward && p.precision == Precision::Fp16) {
    throw ConfigError("optimization.optimizer_in_backward = true cannot run with the plan's fp16 autocast: loss "
                      "scaling must see every gradient before it may skip a step; set "
                      "optimization.mixed_precision_dtype = fp32 or optimization.optimizer_in_backward = false");
  }
  if (c.optimization.pure_bf16_weights) {
    if (p.precision == Precision::Bf16) {
      p.pure_bf16_weights = true;
      p.decide("weights", "bf16 (fp32 optimizer moments)", "optimization.pure_bf16_weights set by user");
    } else {
      p.warnings.push_back(std::string("optimization.pure_bf16_weights needs bf16 precision, but the plan is ") +
                           precision_name(p.precision) + "; keeping fp32 weights");
    }
  }

  // Threads.
  const int64_t cores = std::max(1, hw.cpu.num_physical_cores);
  if (c.is_set("optimization.intra_op_threads") && c.optimization.intra_op_threads > 0) {
    p.intra_op_threads = c.optimization.intra_op_threads;
    p.decide("intra_op_threads", std::to_string(p.intra_op_threads), "set by user");
  } else {
    const int64_t local_ranks = on_gpu ? 1 : std::max<int64_t>(1, ctx.world_size);
    p.intra_op_threads = std::max<int64_t>(1, cores / local_ranks);
    p.decide("intra_op_threads", std::to_string(p.intra_op_threads),
             std::to_string(cores) + " physical cores usable by this process" +
                 (local_ranks > 1 ? " shared by " + std::to_string(local_ranks) + " local ranks" : ""));
  }

  // Memory budget, micro-batch, accumulation and activation checkpointing.
  const GpuInfo* gpu = on_gpu ? plan_gpu(hw, ctx) : nullptr;
  const double available = on_gpu ? static_cast<double>(gpu->free_memory_bytes > 0 ? gpu->free_memory_bytes
                                                                                   : gpu->total_memory_bytes)
                                  : static_cast<double>(hw.memory.effective_available_bytes);
  p.memory_budget_bytes = c.optimization.memory_threshold * available;
  p.zero1 = c.dist.zero1;
  MemoryQuery q;
  q.model = c.model;
  q.precision = p.precision;
  q.on_gpu = on_gpu;
  q.world_size = ctx.world_size;
  q.zero1 = p.zero1;
  q.optimizer_in_backward = in_backward;
  auto fits = [&](int64_t micro, int64_t every) {
    q.micro_batch_size = micro;
    q.checkpoint_every = every;
    return estimate_memory(q).total() <= p.memory_budget_bytes;
  };

  const int64_t target = c.optimization.target_batch_size > 0
                             ? c.optimization.target_batch_size
                             : c.train.micro_batch_size * c.train.grad_accum_steps * ctx.world_size;
  const int64_t per_rank_target = std::max<int64_t>(1, target / ctx.world_size);

  const int64_t vocab = c.model.vocab_size;
  // With the optimizer in backward a step is one micro-batch: the whole per-rank batch.
  const bool micro_fixed = c.is_set("train.micro_batch_size") || in_backward;
  const int64_t wanted_micro = c.is_set("train.micro_batch_size") ? c.train.micro_batch_size
                               : in_backward                      ? per_rank_target
                                                                  : std::min<int64_t>(per_rank_target, c.optimization.max_batch_size);
  // The kernel and head decisions below compare estimates at the wanted micro-batch, no recomputation.
  q.micro_batch_size = wanted_micro;
  q.checkpoint_every = 0;
  q.fused_lm_head_loss = false;

  // Attention kernel. On CPU the GEMM kernel beats the flash-attention one per layer by 1.5-1.6x in
  // bf16 and ties it or wins by up to 1.1x in fp32 (bench/model_attention_bench.cpp), but keeps its
  // probabilities, so it is chosen where they fit.
  const std::string& attention_wanted = c.model.attention;
  std::string attention_reason;
  if (attention_wanted == "math" || attention_wanted == "gemm" || attention_wanted == "sdpa") {
    p.attention = attention_wanted;
    attention_reason = "model.attention = " + attention_wanted + " set by user";
  } else if (on_gpu) {
    p.attention = "sdpa";
    attention_reason = "fused kernel of LibTorch 2.x (flash attention on sm80+); no T x T score matrix is stored";
  } else if (c.model.dropout > 0) {
    p.attention = "sdpa";
    attention_reason = "flash-attention CPU kernel: model.dropout = " + format_number("%.1f", c.model.dropout) +
                       " and the faster GEMM kernel has no dropout";
  } else {
    q.attention = "gemm";
    const double with_probabilities = estimate_memory(q).total();
    const bool probabilities_fit = with_probabilities <= p.memory_budget_bytes;
    p.attention = probabilities_fit ? "gemm" : "sdpa";
    attention_reason = "micro-batch " + std::to_string(wanted_micro) + " needs " + format_bytes(with_probabilities) +
                       " with the GEMM kernel's kept probabilities; budget " + format_bytes(p.memory_budget_bytes) +
                       (probabilities_fit ? ": fits, and it is faster than the flash-attention CPU kernel (1.5x per layer in bf16)"
                                          : ": the flash-attention CPU kernel, which keeps none");
  }
  q.attention = p.attention;
  p.decide("attention",
           p.attention == "gemm"   ? "batched GEMMs, hand-written backward"
           : p.attention == "math" ? "math (cached causal mask)"
                                   : "scaled_dot_product_attention",
           attention_reason);

  // LM head and loss. The fused head drops the whole logits (two fp32 copies of tokens x vocab)
  // but its chunked GEMMs ran 5-10% slower on CPU (docs/benchmarks.md), so by default it is the
  // first memory saving used: when the logits of the wanted micro-batch do not fit beside the
  // activations, before recomputation (which costs 17-29%) is considered.
  std::string head_reason;
  if (c.is_set("optimization.fused_lm_head_loss")) {
    p.fused_lm_head_loss = c.optimization.fused_lm_head_loss;
    head_reason = "optimization.fused_lm_head_loss set by user";
  } else {
    const double plain = estimate_memory(q).total();
    q.fused_lm_head_loss = true;
    const double fused = estimate_memory(q).total();
    const bool plain_fits = plain <= p.memory_budget_bytes;
    p.fused_lm_head_loss = !plain_fits && fused < 0.95 * plain;
    head_reason = "micro-batch " + std::to_string(wanted_micro) + " needs " + format_bytes(plain) + " with the whole " +
                  std::to_string(vocab) + "-way logits, " + format_bytes(fused) + " chunked; budget " +
                  format_bytes(p.memory_budget_bytes) +
                  (plain_fits ? ": fits, and the plain head is faster"
                              : p.fused_lm_head_loss ? ": chunked first, before recomputation"
                                                     : ": chunking would save under 5%");
  }
  q.fused_lm_head_loss = p.fused_lm_head_loss;
  p.decide("lm_head_loss",
           p.fused_lm_head_loss ? "fused, chunks of " + std::to_string(lm_head_loss_chunk_tokens(vocab)) + " tokens"
                                : std::string("linear + cross_entropy"),
           head_reason);
  int64_t every = 0;
  std::string ckpt_reason = "activations fit in memory without recomputation";
  if (c.is_set("optimization.enable_gradient_checkpointing")) {
    every = c.optimization.enable_gradient_checkpointing ? c.optimization.checkpoint_every : 0;
    ckpt_reason = "optimization.enable_gradient_checkpointing set by user";
  }
  int64_t micro;
  std::string micro_reason;
  if (micro_fixed) {
    micro = wanted_micro;
    micro_reason = c.is_set("train.micro_batch_size")
                       ? "train.micro_batch_size set by user"
                       : "optimization.optimizer_in_backward: one micro-batch per step, the whole batch of this rank";
    if (!c.is_set("optimization.enable_gradient_checkpointing") && !fits(micro, 0) && fits(micro, 1)) {
      every = 1;
      ckpt_reason = "micro-batch " + std::to_string(micro) + " fits the memory budget only with recomputation";
    }
  } else {
    micro = std::min<int64_t>(per_rank_target, c.optimization.max_batch_size);
    while (micro > 1 && !fits(micro, every)) micro /= 2;
    if (!c.is_set("optimization.enable_gradient_checkpointing") && !fits(micro, 0)) {
      every = 1;
      ckpt_reason = "the model does not fit at micro-batch 1 without recomputation";
    }
    micro_reason = fits(micro, every) ? "largest that reaches the global batch under the memory budget"
                                      : "smallest possible";
    if (!c.is_set("optimization.enable_gradient_checkpointing") && every == 0 && micro < per_rank_target) {
      int64_t with_ckpt = std::min<int64_t>(per_rank_target, c.optimization.max_batch_size);
      while (with_ckpt > micro && !fits(with_ckpt, 1)) with_ckpt /= 2;
      if (with_ckpt >= 2 * micro) {
        every = 1;
        ckpt_reason = "recomputation lets micro-batch " + std::to_string(with_ckpt) + " fit instead of " +
                      std::to_string(micro);
        micro = with_ckpt;
      }
    }
  }
  if (!fits(1, 1) && !fits(micro, every)) {
    q.micro_batch_size = 1;
    q.checkpoint_every = 1;
    MemoryEstimate e = estimate_memory(q);
    const double need = e.total();
    std::string hint = on_gpu ? "shard optimizer states (dist.zero1=true) over at least " +
                                    std::to_string(static_cast<int64_t>(std::ceil(need / p.memory_budget_bytes))) +
                                    " GPUs, or use a smaller model"
                              : "use a smaller model (model.n_layer / model.n_embd) or a machine with more memory";
    throw HardwareError("the model needs " + format_bytes(need) + " per device even at micro-batch 1 with full "
                        "activation checkpointing (" + e.breakdown() + "), but the budget is " +
                        format_bytes(p.memory_budget_bytes) + " (optimization.memory_threshold = " +
                        format_number("%.1f", c.optimization.memory_threshold) + " of " + format_bytes(available) + "); " + hint);
  }
  if (in_backward && !c.is_set("train.micro_batch_size") && !fits(micro, every)) {
    q.micro_batch_size = micro;
    q.checkpoint_every = every;
    throw ConfigError("optimization.optimizer_in_backward = true runs the whole batch of this rank (" +
                      std::to_string(micro) + " sequences) as one micro-batch, which needs " +
                      format_bytes(estimate_memory(q).total()) + (every > 0 ? " even with recomputation" : "") +
                      ", over the budget of " + format_bytes(p.memory_budget_bytes) +
                      "; set a smaller optimization.target_batch_size or optimization.optimizer_in_backward = false");
  }
  p.checkpoint_every = every;
  p.decide("activation_checkpointing",
           every == 0 ? "off" : every == 1 ? "every block" : "every " + std::to_string(every) + " blocks", ckpt_reason);
  p.micro_batch_size = micro;
  if (c.is_set("train.grad_accum_steps") && c.optimization.target_batch_size == 0) {
    p.grad_accum_steps = c.train.grad_accum_steps;
  } else {
    p.grad_accum_steps = std::max<int64_t>(1, (per_rank_target + micro - 1) / micro);
  }
  if (in_backward && p.grad_accum_steps > 1) {
    throw ConfigError("optimization.optimizer_in_backward = true needs one micro-batch per step, but micro-batch " +
                      std::to_string(micro) + " takes " + std::to_string(p.grad_accum_steps) +
                      " accumulation steps to reach " + std::to_string(per_rank_target) +
                      " sequences per rank; set train.micro_batch_size = " + std::to_string(per_rank_target) +
                      " or a smaller optimization.target_batch_size");
  }
  p.decide("micro_batch_size", std::to_string(micro), micro_reason);
  std::string accum_reason = "global batch " + std::to_string(p.global_batch_size()) + " sequences = " +
                             std::to_string(micro) + " x " + std::to_string(p.grad_accum_steps) + " x " +
                             std::to_string(ctx.world_size) + " ranks";
  if (p.global_batch_size() != target) accum_reason += " (target " + std::to_string(target) + " rounded up)";
  p.decide("grad_accum_steps", std::to_string(p.grad_accum_steps), accum_reason);
  q.micro_batch_size = micro;
  q.checkpoint_every = every;
  MemoryEstimate e = estimate_memory(q);
  p.predicted_peak_bytes = e.total();
  p.decide("memory", format_bytes(e.total()) + " predicted peak",
           "budget " + format_bytes(p.memory_budget_bytes) + " = " + format_number("%.1f", c.optimization.memory_threshold * 100) +
               "% of " + format_bytes(available) + "; " + e.breakdown());
  if (e.total() > p.memory_budget_bytes) {
    p.warnings.push_back("predicted peak " + format_bytes(e.total()) + " exceeds the memory budget " +
                         format_bytes(p.memory_budget_bytes) + " with the settings given");
  }
  p.auto_batch_size = c.optimization.auto_batch_size;

  // Optimizer.
  p.fused_optimizer = c.optimization.fused_optimizer;
  p.decide("optimizer", std::string(p.fused_optimizer ? "fused AdamW (at::_fused_adamw_)" : "AdamW (reference)"),
           c.is_set("optimization.fused_optimizer") ? "set by user" : "one kernel for all parameters of a dtype");
  p.optimizer_in_backward = in_backward;
  {
    MemoryQuery other = q;
    other.optimizer_in_backward = !in_backward;
    const double here = estimate_memory(q).gradients, there = estimate_memory(other).gradients;
    p.decide("optimizer_step", in_backward ? "in backward, per parameter; gradients freed as made" : "after backward",
             in_backward ? "optimization.optimizer_in_backward set by user: gradients peak at " + format_bytes(here) +
                               " instead of " + format_bytes(there)
             : c.train.grad_clip > 0 ? "clipping by the global norm (train.grad_clip) needs every gradient first"
                                     : "optimization.optimizer_in_backward = true would hold " + format_bytes(there) +
                                           " of gradients instead of " + format_bytes(here));
  }
  p.optimizer_state_device = c.optimization.optimizer_state_device == "cpu" ? "cpu" : "device";
  p.decide("optimizer_state", p.zero1 ? "sharded over " + std::to_string(ctx.world_size) + " ranks (ZeRO-1)"
                                      : std::string(on_gpu ? "on the GPU" : "in host memory"),
           p.zero1 ? "dist.zero1 set by user" : "fits the memory budget");

  // Data loading.
  if (c.optimization.num_workers >= 0) {
    p.num_workers = c.optimization.num_workers;
    p.decide("loader_workers", std::to_string(p.num_workers), "optimization.num_workers set by user");
  } else {
    p.num_workers = on_gpu ? std::min<int64_t>(4, std::max<int64_t>(1, cores / 2)) : 1;
    p.decide("loader_workers", std::to_string(p.num_workers),
             on_gpu ? "batches are cheap to cut from memory-mapped tokens; a few threads keep the GPU fed"
                    : "one thread cuts windows from memory-mapped tokens at >100M tokens/s; the cores train");
  }
  p.prefetch_factor = c.optimization.prefetch_factor;
  p.pin_memory = on_gpu && c.optimization.pin_memory;
  if (on_gpu) {
    p.allow_tf32 = c.optimization.allow_tf32 && gpu->tf32;
    p.cudnn_benchmark = c.optimization.cudnn_benchmark;
    p.cuda_graphs = false;
    p.decide("pinned_memory", p.pin_memory ? "on, non-blocking copies" : "off",
             p.pin_memory ? "overlaps host-to-device copies with compute" : "optimization.pin_memory = false");
    p.decide("tf32", p.allow_tf32 ? "on" : "off", gpu->tf32 ? "TF32 tensor cores for fp32 matmuls" : "not supported");
  }

  if (c.optimization.cuda_graphs) {
    p.warnings.push_back("optimization.cuda_graphs is not implemented in this version: the step runs eagerly");
  }

  // Peak FLOP/s for MFU.
  if (on_gpu) {
    p.peak_flops = gpu->peak_bf16_tflops * 1e12;
    p.decide("mfu_peak", format_number("%.1f", gpu->peak_bf16_tflops) + " TFLOP/s", "dense bf16 tensor-core peak of " + gpu->name);
  } else {
    const auto& m = hw.math;
    const bool bf16 = p.precision == Precision::Bf16;
    double measured = bf16 ? m.bf16_gemm_gflops : m.fp32_gemm_gflops;
    if (measured <= 0) measured = bf16 ? m.peak_bf16_gflops : m.peak_fp32_gflops;
    p.peak_flops = measured * 1e9;
    p.decide("mfu_peak", format_number("%.1f", measured) + " GFLOP/s",
             std::string(m.gemm_measured ? "measured " : "ISA peak of ") + (bf16 ? "bf16" : "fp32") + " GEMM on " +
                 std::to_string(m.gemm_threads > 0 ? m.gemm_threads : cores) + " threads");
  }
  return p;
}

}  // namespace hwt
