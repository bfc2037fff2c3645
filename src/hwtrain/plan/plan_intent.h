// PlanIntent: what the user asked of the planner, typed. A std::optional holds a choice the user
// made explicitly (in a TOML file or with --set), which the planner never overrides; an empty one
// lets the planner decide. Read from the RunConfig once (run/run_bindings.h); the planner's decide_*
// functions (plan/decisions.h) read this, never the raw config or its string key look-ups.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "hwtrain/model/model_config.h"
#include "hwtrain/plan/plan.h"

namespace hwt {

struct DeviceIntent {
  enum class Kind { Auto, Cpu, Cuda } kind = Kind::Auto;
  std::optional<int> index;  // cuda:N
  std::string text;          // as the user wrote it, for messages
};

struct PrecisionIntent {
  std::optional<Precision> dtype;  // empty = auto
  std::string source;              // "optimization.mixed_precision_dtype = bf16", for the reason
};

struct PlanIntent {
  ModelConfig model;  // the shape, with its vocab_size resolved
  DeviceIntent device;
  PrecisionIntent precision;
  bool pure_bf16_weights = false;
  AutocastSwitches autocast;
  LossScaling loss_scaling;
  std::optional<int64_t> intra_op_threads;
  std::optional<AttentionKernel> attention;
  std::optional<bool> fused_lm_head_loss;
  std::optional<int64_t> checkpoint_every;  // 0 = off, k = every k-th block
  std::optional<int64_t> micro_batch_size;
  std::optional<int64_t> grad_accum_steps;  // only when no target_batch_size is given
  int64_t target_batch_size = 0;            // global, in sequences; 0 = from the two above
  int64_t rows_per_rank = 16;               // train.micro_batch_size x grad_accum_steps as configured
  int64_t max_batch_size = 64;
  double memory_threshold = 0.75;
  bool auto_batch_size = false;
  OptimizerStep optimizer_step = OptimizerStep::AfterBackward;
  bool clips_by_global_norm = true;         // train.grad_clip > 0
  std::optional<bool> fused_optimizer;
  std::optional<StateDevice> optimizer_state_device;
  std::optional<Sharding> sharding;
  bool deferred_init = true;  // dist.deferred_init: where it applies (zero2/zero3, no model split)
  ReduceDtype reduce_dtype = ReduceDtype::Fp32;  // dist.reduce_dtype
  std::optional<int64_t> tensor_parallel;    // dist.tensor_parallel when set: the layout search keeps it
  std::optional<int64_t> pipeline_parallel;  // dist.pipeline_parallel when set
  std::optional<int64_t> pipeline_chunks;    // dist.pipeline_chunks when set
  bool sequence_parallel = true;             // dist.sequence_parallel: how the layout search costs TP
  // dist.tensor_parallel, pipeline_parallel or pipeline_chunks = auto: a run's mesh is the layout search's choice
  // (without it only `hwtrain plan --gpus` plans search layouts; a run's mesh is fixed before it).
  bool search_layout = false;
  std::optional<StateDtype> optimizer_state_dtype;  // empty = auto
  std::optional<int64_t> num_workers;
  int64_t prefetch_factor = 2;
  bool pin_memory = true;
  bool allow_tf32 = true;
  bool cudnn_benchmark = true;
  bool cuda_graphs = false;
  bool deterministic = false;
};

}  // namespace hwt
