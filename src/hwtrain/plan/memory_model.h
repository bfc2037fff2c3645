// The memory model: an analytic estimate of a training step's peak memory, term by term —
// parameters, gradients, optimizer moments, saved activations per layer (by precision, sequence
// length, micro-batch and checkpointing policy), attention workspace, logits, and framework
// overhead. Coefficients are calibrated against measurement (bench/memory_model_bench.cpp: the
// peak resident memory training adds to the process on CPU; docs/benchmarks.md has the table).
// On CUDA the same terms apply with the CUDA context as overhead (not calibrated here: no GPU).
#pragma once
#include <cstdint>
#include <string>

#include "hwtrain/model/model_config.h"
#include "hwtrain/plan/plan.h"

namespace hwt {

struct MemoryQuery {
  ModelConfig model;          // with the resolved vocab_size
  int64_t micro_batch_size = 1;
  Precision precision = Precision::Fp32;
  int64_t checkpoint_every = 0;  // 0 = none, 1 = every block, k = every k-th block
  // Sdpa: fused, no T x T matrix kept; Gemm: the chunked causal probabilities kept per layer;
  // Math: the whole score and probability matrices kept per layer.
  AttentionKernel attention = AttentionKernel::Sdpa;
  bool fused_lm_head_loss = false;  // chunked head + loss: logits one chunk at a time
  bool on_gpu = false;
  // The cross-entropy fused (a published torch.compile or Megatron run, not hwtrain's eager one):
  // no dense fp32 gradient beside the saved log-softmax on CUDA (see estimate_memory's logits).
  bool compiled_cross_entropy = false;
  int64_t world_size = 1;
  // What the ranks shard (plan.h). ZeRO-2/3 keep fp32 master shards and compute in the precision's
  // dtype (bf16 parameters under bf16, as FSDP2's param_dtype; fp32 otherwise).
  Sharding sharding = Sharding::None;
  bool int8_moments = false;     // block-wise 8-bit AdamW moments (2 bytes and a scale per 2048)
  // optimization.optimizer_state_device = cpu (train/adamw.h's host_state): the moments, an fp32
  // master and a gradient staging buffer per optimized parameter in host memory. On a GPU that
  // takes the moments off the device; on the CPU the host is the device and it adds the two copies.
  bool offload_optimizer = false;
  // AdamW steps each parameter in backward and frees its gradient (train/optimizer_in_backward.h):
  // one block's gradients and the embeddings' exist at once instead of all of them.
  bool optimizer_in_backward = false;
};

struct MemoryEstimate {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0, attention = 0, logits = 0,
         overhead = 0;
  // ZeRO-2/3: what exists only while units run or reduce: ZeRO-3's gathered parameters (the rest's
  // unit and two blocks), and one unit's gradients with its flat reduce buffer.
  double buffers = 0;
  // The step's peak: parameters + optimizer + overhead + buffers + the larger of gradients and
  // activations (with attention and logits) + a calibrated share of the smaller.
  double total() const;
  double model_states() const { return parameters + gradients + optimizer; }  // as model_state_bytes counts them
  std::string breakdown() const;  // "params 12 MiB, grads ..., total ..."
};

// The part of estimate_memory(q).activations that is the residual stream (the inputs the recomputed
// blocks keep and the backward's transients, fp32 per token and channel): what every tensor rank
// holds whole without sequence parallelism (plan/layout_cost.cpp).
double residual_stream_activation_bytes(const MemoryQuery& q);

// Number of parameters of the GPT of `m` (tied head, learned positions), embeddings included.
int64_t gpt_num_parameters(const ModelConfig& m);

MemoryEstimate estimate_memory(const MemoryQuery& q);

// Host memory the offloaded optimizer holds per rank (0 without offload, or on the CPU, where
// estimate_memory counts it): moments + fp32 masters + gradient staging of the optimized parameters.
double host_optimizer_bytes(const MemoryQuery& q);

// The model states per rank (parameters + gradients + optimizer, without the buffers) of a layout:
// what the ZeRO paper's Figure 1 counts (2Ψ + 2Ψ + KΨ/N etc.), for the plan's sharding line.
double model_state_bytes(const MemoryQuery& q);

}  // namespace hwt
