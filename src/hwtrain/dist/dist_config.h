// DistConfig: distributed options (data parallel, sharding, the parallel mesh). World size and rank come from the environment (torchrun,
// Slurm or `hwtrain launch`), not from here. Header-only plain struct.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/core/enum_names.h"
#include "hwtrain/core/option_checks.h"

namespace hwt {

// The c10d backend: Gloo (CPU tensors) or NCCL (CUDA tensors).
enum class DistBackend { kGloo, kNccl };
template <>
struct EnumNames<DistBackend> {
  static constexpr std::array<std::pair<DistBackend, const char*>, 2> table{{
      {DistBackend::kGloo, "gloo"},
      {DistBackend::kNccl, "nccl"}}};
};

// What data-parallel ranks shard (Rajbhandari et al. 2020): nothing; the AdamW moments (ZeRO-1);
// also the fp32 master weights and the gradients (ZeRO-2); also the parameters, gathered a unit at a
// time (ZeRO-3, FSDP). dist/zero1.h and dist/sharded_parameters.h carry them out.
enum class Sharding { None, Zero1, Zero2, Zero3 };
template <>
struct EnumNames<Sharding> {
  static constexpr std::array<std::pair<Sharding, const char*>, 4> table{{
      {Sharding::None, "none"},
      {Sharding::Zero1, "zero1"},
      {Sharding::Zero2, "zero2"},
      {Sharding::Zero3, "zero3"}}};
};

// The dtype ZeRO-2/3 reduce-scatter gradients in (FSDP2's reduce_dtype): fp32, or bf16 for half
// the bytes; the fp32 gradient shards accumulate what arrives either way.
enum class ReduceDtype { Fp32, Bf16 };
template <>
struct EnumNames<ReduceDtype> {
  static constexpr std::array<std::pair<ReduceDtype, const char*>, 2> table{{
      {ReduceDtype::Fp32, "fp32"},
      {ReduceDtype::Bf16, "bf16"}}};
};

struct DistConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  std::optional<DistBackend> backend;  // empty = auto: nccl on CUDA, gloo on CPU
  double bucket_size_mb = 25.0;
  std::optional<Sharding> sharding;  // empty = auto: the planner's choice
  ReduceDtype reduce_dtype = ReduceDtype::Fp32;
  bool deferred_init = true;  // where it applies (plan/sharding_decision.cpp)
  double timeout = 60.0;
  // The (data x pipeline x tensor) mesh (dist/device_mesh.h): ranks per tensor-parallel group and
  // pipeline stages; data parallel is the rest of the world size. Empty = auto: the planner's layout
  // search (plan/parallel_layout.h) chooses.
  std::optional<int64_t> tensor_parallel = 1;
  std::optional<int64_t> pipeline_parallel = 1;
  // Model chunks per stage: > 1 interleaves the 1F1B schedule; empty = auto (the layout search's).
  std::optional<int64_t> pipeline_chunks = 1;
  bool sequence_parallel = true;  // with tensor_parallel > 1

  void validate() const {
    check_positive("dist.bucket_size_mb", bucket_size_mb);
    if (tensor_parallel) check_at_least("dist.tensor_parallel", *tensor_parallel, 1);
    if (pipeline_parallel) check_at_least("dist.pipeline_parallel", *pipeline_parallel, 1);
    if (pipeline_chunks) check_at_least("dist.pipeline_chunks", *pipeline_chunks, 1);
    // Converted to milliseconds and nanoseconds by the stores and the watchdog: 30 days at most.
    if (!(timeout > 0 && timeout <= 30 * 86400.0)) {
      option_range_error("dist.timeout", option_text(timeout), "must be > 0 and at most 2592000 seconds (30 days)");
    }
  }

  template <class V>
  void visit(V& v) {
    v("backend", backend, "process group backend: auto (nccl on CUDA, gloo on CPU), gloo or nccl");
    v("bucket_size_mb", bucket_size_mb, "gradient all-reduce (and ZeRO-1 parameter broadcast) bucket size in MB");
    v("sharding", sharding,
      "what data-parallel ranks shard: none, zero1 (AdamW moments), zero2 (moments, fp32 master weights and "
      "gradients), zero3 (also the parameters, gathered a block at a time) or auto (the planner's choice by memory)");
    v("reduce_dtype", reduce_dtype,
      "the dtype zero2/zero3 reduce-scatter gradients in: fp32, or bf16 (half the bytes on the wire, each "
      "rank's averaged shard rounded to bf16 before it is added to its fp32 gradient shard; FSDP2's "
      "reduce_dtype); DDP and zero1 reduce the fp32 gradients");
    v("deferred_init", deferred_init,
      "with zero2/zero3 and no tensor or pipeline parallelism, each rank builds the model unit by unit into its "
      "shards (the same initial values, but never the whole fp32 model in memory); false builds it whole first; "
      "other runs always build it whole");
    v("timeout", timeout, "seconds before a dead or hung rank fails the run");
    v("tensor_parallel", tensor_parallel,
      "ranks that split each layer's weights (Megatron-style tensor parallelism; consecutive ranks, so a group "
      "stays on one node); must divide the world size, model.n_head and model.n_kv_head; auto: the planner's "
      "layout search chooses it (with dist.pipeline_parallel) by predicted memory and step time");
    v("sequence_parallel", sequence_parallel,
      "with tensor_parallel > 1, each rank keeps only its slice of the sequence between the layers (norms, "
      "dropout, residual: 1/tensor_parallel of their activations; model.block_size must divide)");
    v("pipeline_parallel", pipeline_parallel,
      "pipeline stages the blocks are cut into (1 = none); data parallel is world size / (tensor x pipeline); "
      "auto: the planner's layout search chooses it");
    v("pipeline_chunks", pipeline_chunks,
      "model chunks per pipeline stage: v > 1 cuts the blocks into pipeline_parallel x v and runs interleaved "
      "1F1B, a v times smaller bubble for v times the messages (train.grad_accum_steps must be a multiple of "
      "pipeline_parallel); auto: the planner's layout search chooses it by predicted step time and memory");
  }
};

}  // namespace hwt
