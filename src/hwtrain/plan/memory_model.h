// The memory model: an analytic estimate of a training step's peak memory, term by term —
// parameters, gradients, optimizer moments, saved activations per layer (by precision, sequence
// length, micro-batch and checkpointing policy), attention workspace, logits, and framework
// overhead. Coefficients are calibrated against measurement (bench/memory_model_bench.cpp:
// peak RSS growth of a training step on CPU, the caching allocator's peak on CUDA).
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
  bool sdpa = true;              // fused attention (no T x T score matrix kept)
  bool on_gpu = false;
  int64_t world_size = 1;
  bool zero1 = false;            // optimizer moments sharded over world_size
};

struct MemoryEstimate {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0, attention = 0, logits = 0,
         overhead = 0;
  double total() const { return parameters + gradients + optimizer + activations + attention + logits + overhead; }
  std::string breakdown() const;  // "params 12 MiB, grads ..., total ..."
};

// Number of parameters of the GPT of `m` (tied head, learned positions), embeddings included.
int64_t gpt_num_parameters(const ModelConfig& m);

MemoryEstimate estimate_memory(const MemoryQuery& q);

}  // namespace hwt
