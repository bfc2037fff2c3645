#include "hwtrain/plan/memory_model.h"

#include <algorithm>

#include "hwtrain/core/strings.h"
#include "hwtrain/model/gemm_attention.h"
#include "hwtrain/model/lm_head_loss.h"

namespace hwt {

namespace {

// Calibrated with bench/memory_model_bench.cpp on the 2-core Zen 4 machine (docs/benchmarks.md):
// tiny, char-small and a 50M model, fp32 and bf16, with and without activation checkpointing.
//
// The constants below were fitted to those 12 measurements (worst error 11.7%); a held-out
// configuration checks them (the default model, same bench).
//
// Saved activation elements per token per block: counting what LibTorch's autograd keeps for a
// pre-LN block gives 17 C (LayerNorm and matmul inputs, q/k/v/out, GELU input and output); the
// fit gives 15 C (some tensors are shared between ops and stored once).
constexpr double kSavedPerToken = 15.0;
constexpr double kBytesFp32 = 4.0;
// Under autocast the matmul inputs, attention and GELU tensors (13 of the 17 C) are bf16/fp16.
constexpr double kSavedLowPrecisionShare = 13.0 / 17.0;
// Transient memory while one block runs backward: gradients of its activations and temporaries.
constexpr double kBackwardTransientPerToken = 4.0;
// Backward allocates the weight gradients while it frees activations; they overlap this much of
// the smaller of the two (0 = one replaces the other, 1 = both whole at once).
constexpr double kGradientActivationOverlap = 0.75;
// Process memory that training adds beyond the terms (oneDNN scratch, allocator slack): the fit
// finds none on CPU.
constexpr double kCpuOverheadBytes = 0.0;
constexpr double kGpuOverheadBytes = 512.0 * 1024 * 1024;  // CUDA context and cuBLAS workspaces

}  // namespace

double residual_stream_activation_bytes(const MemoryQuery& q) {
  const double tokens = static_cast<double>(q.micro_batch_size * q.model.block_size);
  const int64_t every = q.checkpoint_every, l = q.model.n_layer;
  const double checkpointed = every > 0 ? static_cast<double>((l + every - 1) / every) : 0.0;
  return tokens * static_cast<double>(q.model.n_embd) * (checkpointed + kBackwardTransientPerToken) * kBytesFp32;
}

int64_t gpt_num_parameters(const ModelConfig& m) { return count_model_parameters(m, m.vocab_size); }

namespace {

// Saved activation elements per token per block, in units of the GPT-2 count the fit scaled (17 C
// counted, 15 C fitted). Llama's block, counted the same way: RMSNorm inputs and outputs (4 C),
// q, its rotate_half and its rotated copy (3 C), k, v, k's rotate_half and rotated copy (4 K D), the
// attention output (C), and the SwiGLU's gate, up, silu(gate) and product (4 I); GPT-2's fit ratio
// applied. Checked, not fitted: bench/memory_model_bench.cpp's llama rows (docs/benchmarks.md).
// Since model/swiglu_product.h the block keeps no silu(gate) (3 I); the count keeps 4 I: with it the
// 6-block rows were within -8.0%..+5.4% after the change (-12.6%..+6.3% before), and the published
// runs the layout search is checked against (torchtitan's) keep silu(gate) as autograd does.
double saved_elements_per_token(const ModelConfig& m) {
  const double c = static_cast<double>(m.n_embd);
  if (!m.is_llama()) return kSavedPerToken * c;
  const double kv = static_cast<double>(m.kv_heads() * m.head_dim());
  const double counted = 8.0 * c + 4.0 * kv + 4.0 * static_cast<double>(m.mlp_width());
  return counted * kSavedPerToken / 17.0;
}

// Parameters outside the blocks: token embedding, position embedding (gpt2) or untied head (llama).
int64_t count_embedding_parameters(const ModelConfig& m) {
  return m.is_llama() ? m.vocab_size * m.n_embd * (m.tied_head() ? 1 : 2) : (m.vocab_size + m.block_size) * m.n_embd;
}

// ZeRO-2/3 (dist/sharded_parameters.h): per rank an fp32 master shard and an fp32 gradient shard,
// and the parameters in the compute dtype whole (ZeRO-2) or not at all (ZeRO-3); in the buffers,
// ZeRO-3's gathered units (an edge unit and two blocks: the running one and the prefetched one) and
// one block's gradients with its flat fp32 reduce buffer beside an edge unit's. The edge unit is
// all the rest when the head is tied (gathered through the step), else the embeddings or the head.
void add_sharded_states(const MemoryQuery& q, MemoryEstimate& e) {
  const ModelConfig& m = q.model;
  const double n = static_cast<double>(q.world_size), params = static_cast<double>(gpt_num_parameters(m));
  const double compute = q.precision == Precision::Fp32 ? kBytesFp32 : 2.0;
  const double rest = static_cast<double>(count_embedding_parameters(m));
  const double block = (params - rest) / static_cast<double>(std::max<int64_t>(1, m.n_layer));
  const double edge = m.tied_head() ? rest : rest / 2.0;
  const bool zero2 = q.sharding == Sharding::Zero2;
  e.parameters = params * kBytesFp32 / n + (zero2 ? params * compute : 0.0);
  e.gradients = params * kBytesFp32 / n;
  e.buffers = (compute + kBytesFp32) * (block + edge) + (zero2 ? 0.0 : (edge + 2.0 * block) * compute);
}

// Moments (and, offloaded, the fp32 masters and gradient staging) of the parameters this rank's
// optimizer updates: all of them, or with any sharding 1/N of them.
double optimizer_bytes(const MemoryQuery& q) {
  const double params = static_cast<double>(gpt_num_parameters(q.model));
  const double moment_bytes = q.int8_moments ? 2.0 * (1.0 + kBytesFp32 / 2048.0) : 2.0 * kBytesFp32;
  const double host_copies = q.offload_optimizer ? 2.0 * kBytesFp32 : 0.0;
  return (moment_bytes + host_copies) * params /
         (q.sharding != Sharding::None ? static_cast<double>(q.world_size) : 1.0);
}

}  // namespace

double host_optimizer_bytes(const MemoryQuery& q) {
  return q.offload_optimizer && q.on_gpu ? optimizer_bytes(q) : 0.0;
}

MemoryEstimate estimate_memory(const MemoryQuery& q) {
  MemoryEstimate e;
  const double params = static_cast<double>(gpt_num_parameters(q.model));
  const bool low = q.precision != Precision::Fp32;
  e.parameters = params * kBytesFp32;
  if (q.optimizer_in_backward) {
    // A checkpointed block hands back all its weight gradients at once; the tied embedding's
    // gradient from the head waits for the embedding's own at the very end of backward, where the
    // position embedding's is made too.
    const ModelConfig& m = q.model;
    const int64_t embeddings = count_embedding_parameters(m);
    const double per_block =
        static_cast<double>(gpt_num_parameters(m) - embeddings) / static_cast<double>(m.n_layer);
    e.gradients = (per_block + static_cast<double>(embeddings)) * kBytesFp32;
  } else {
    e.gradients = params * kBytesFp32;
  }
  e.optimizer = q.offload_optimizer && q.on_gpu ? 0.0 : optimizer_bytes(q);
  if (q.sharding == Sharding::Zero2 || q.sharding == Sharding::Zero3) add_sharded_states(q, e);

  const double tokens = static_cast<double>(q.micro_batch_size * q.model.block_size);
  const double c = static_cast<double>(q.model.n_embd);
  const double bytes_per_saved =
      low ? kBytesFp32 * (1.0 - kSavedLowPrecisionShare) + 2.0 * kSavedLowPrecisionShare : kBytesFp32;
  const double per_block = tokens * saved_elements_per_token(q.model) * bytes_per_saved;
  const double block_input = tokens * c * kBytesFp32;
  const int64_t l = q.model.n_layer;
  // Layers whose attention probabilities exist at once: all, or those not recomputed plus one.
  int64_t layers_kept = l;
  if (q.checkpoint_every <= 0) {
    e.activations = static_cast<double>(l) * per_block;
  } else {
    const int64_t checkpointed = (l + q.checkpoint_every - 1) / q.checkpoint_every;  // blocks 0, k, 2k, ...
    layers_kept = l - checkpointed + 1;
    // Checkpointed blocks keep their input only; one of them is recomputed at a time.
    e.activations = static_cast<double>(l - checkpointed) * per_block +
                    static_cast<double>(checkpointed) * block_input + per_block;
  }
  e.activations += tokens * c * kBackwardTransientPerToken * kBytesFp32;  // in residual_stream_activation_bytes too
  // Autocast's 16-bit weight copies live from the forward until backward has used them.
  const bool weights_in_compute_dtype = q.sharding == Sharding::Zero2 || q.sharding == Sharding::Zero3;
  if (low && !weights_in_compute_dtype) e.activations += params * 2.0;
  const double heads = static_cast<double>(q.model.n_head);
  const double t = static_cast<double>(q.model.block_size);
  const double scores = static_cast<double>(q.micro_batch_size) * heads * t * t;
  const double score_bytes = low ? 2.0 : kBytesFp32;
  if (q.attention == AttentionKernel::Sdpa) {  // one block's workspace
    e.attention = scores * kBytesFp32 / (q.on_gpu ? 8.0 : 1.0);
  } else if (q.attention == AttentionKernel::Gemm) {  // kept probabilities, and one chunk's scores and gradients
    const double kept = static_cast<double>(q.micro_batch_size) * heads *
                        static_cast<double>(gemm_attention_kept_probabilities(q.model.block_size));
    const double chunk = static_cast<double>(q.micro_batch_size) * heads * t *
                         static_cast<double>(std::min<int64_t>(kGemmAttentionChunkRows, q.model.block_size));
    e.attention = (kept * static_cast<double>(layers_kept) + 2.0 * chunk) * score_bytes;
  } else {  // math: probabilities per layer
    e.attention = scores * score_bytes * static_cast<double>(layers_kept) + scores * kBytesFp32;
  }
  // At the backward peak: the fp32 log-softmax that cross-entropy saved and the logits' gradient
  // (the logits themselves are freed once log-softmax has read them). On CUDA three copies: the
  // loss alone peaks at 2.5 (bench/ce_memory.py on an H100: the saved log-softmax, the fp32
  // gradient its backward writes, the logits' bf16 gradient), and whole GPT-2 steps there fit 3
  // (predicted/measured 1.03 for 124M and 350M at micro-batch 32; with 2 it was 0.82-0.96, falling
  // with the micro-batch; the half copy beyond the loss's own is not attributed). fp16 logits, read
  // directly by the loss (model/token_loss.h), peaked at 2.5 where casting them first peaked at 3.0
  // in the script's later form (2026-11-27); whole fp16 steps were not measured, so both keep 3.
  // bf16 logits on CUDA go through the chunked loss since 2026-11-28 (model/token_loss.h): on CPU
  // tensors its loss peaks at 0.66 copies where the cast-first one peaks at 3.0
  // (bench/token_loss_bench.cpp); it has not run on a GPU, so the model keeps 3 until it is measured.
  // Fused head: one chunk's fp32 probabilities and their 16/32-bit copy; the head's weight
  // gradient is made in the forward pass and held until backward, beside the activations.
  const double vocab = static_cast<double>(q.model.vocab_size);
  const double logit_rows =
      q.fused_lm_head_loss ? std::min(tokens, static_cast<double>(lm_head_loss_chunk_tokens(q.model.vocab_size)))
                           : tokens;
  const double logit_copies = q.on_gpu && !q.fused_lm_head_loss && !q.compiled_cross_entropy ? 3.0 : 2.0;
  e.logits = logit_copies * logit_rows * vocab * kBytesFp32 + (q.fused_lm_head_loss ? vocab * c * kBytesFp32 : 0.0);
  e.overhead = q.on_gpu ? kGpuOverheadBytes : kCpuOverheadBytes;
  return e;
}

double model_state_bytes(const MemoryQuery& q) {
  return estimate_memory(q).model_states();
}

double MemoryEstimate::total() const {
  // Backward frees activations block by block while it allocates the weight gradients, so the
  // step's peak holds the larger of the two and only part of the smaller.
  const double transient = activations + attention + logits;
  return parameters + optimizer + buffers + std::max(gradients, transient) +
         kGradientActivationOverlap * std::min(gradients, transient) + overhead;
}

std::string MemoryEstimate::breakdown() const {
  return "params " + format_bytes(parameters) + ", grads " + format_bytes(gradients) + ", optimizer " +
         format_bytes(optimizer) + (buffers > 0 ? ", sharding buffers " + format_bytes(buffers) : std::string()) +
         ", activations " + format_bytes(activations) + ", attention " +
         format_bytes(attention) + ", logits " + format_bytes(logits) + ", overhead " + format_bytes(overhead) +
         " -> peak " + format_bytes(total());
}

}  // namespace hwt
