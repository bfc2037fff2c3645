// Plan: how a run trains on this hardware, and everything the training loop needs to know about
// it. Every decision carries a one-line reason; the plan is printed at the start of each run and
// saved with every checkpoint (plan.json). Produced by plan/planner.h, consumed by the parts the
// trainer is built from, which never decide these things themselves. Values are typed here; their
// plan.json spelling is kept stable (device "cpu" / "cuda:0", attention "gemm", ...).
#pragma once
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/core/enum_names.h"
#include "hwtrain/dist/dist_config.h"
#include "hwtrain/model/attention_kernel.h"

namespace hwt {

enum class Precision { Fp32, Bf16, Fp16 };
template <>
struct EnumNames<Precision> {
  static constexpr std::array<std::pair<Precision, const char*>, 3> table{{
      {Precision::Bf16, "bf16"},
      {Precision::Fp16, "fp16"},
      {Precision::Fp32, "fp32"}}};
};
const char* precision_name(Precision p);  // "fp32" | "bf16" | "fp16"

// Where and when AdamW updates a parameter.
enum class OptimizerStep {
  AfterBackward,  // one step over all parameters once the gradients are complete (and synced)
  InBackward,     // per parameter from its post-accumulate-grad hook; gradients freed as made
};

// Sharding (dist/dist_config.h): none | zero1 | zero2 | zero3.
const char* sharding_name(Sharding s);  // "none" | "zero1" | "zero2" | "zero3"
Sharding sharding_from_name(const std::string& s);  // ConfigError naming the valid ones

// Where the optimizer moments live: with the weights, or (Host) with fp32 masters in host memory and
// the update run there (train/adamw.h's host_state, ZeRO-Offload's placement).
enum class StateDevice { Device, Host };
template <>
struct EnumNames<StateDevice> {
  static constexpr std::array<std::pair<StateDevice, const char*>, 2> table{{
      {StateDevice::Device, "device"},
      {StateDevice::Host, "cpu"}}};
};

// The AdamW moments' dtype: fp32, or block-wise 8-bit (train/blockwise_quant.h).
enum class StateDtype { Fp32, Int8 };
template <>
struct EnumNames<StateDtype> {
  static constexpr std::array<std::pair<StateDtype, const char*>, 2> table{{
      {StateDtype::Fp32, "fp32"},
      {StateDtype::Int8, "int8"}}};
};

// Loss scaling for fp16 (PyTorch's GradScaler defaults); unused with bf16 and fp32.
struct LossScaling {
  bool dynamic = true;  // false: a static scale, never updated
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  // Consecutive non-finite losses in low precision after which training continues in fp32; 0 = never.
  int64_t nonfinite_fallback_steps = 3;
  double min_scale = 0.0;  // the dynamic scale's bounds; 0 = none
  double max_scale = 0.0;
};

// The autocast switches (optimization.cast_inputs, cast_outputs, autocast_cache): what they do is
// described once, in optimization_config.h; they act only under a 16-bit precision.
struct AutocastSwitches {
  bool cast_inputs = false;
  bool cast_outputs = true;
  bool cache = true;
};

// The (data x pipeline x tensor) layout of a multi-GPU run, as plan/parallel_layout.h chose it:
// tensor_parallel x pipeline_parallel x data_parallel = the GPUs; what the data-parallel ranks shard,
// the micro-batch and how many of them a pipeline runs per step, recomputation, and the predictions.
struct ParallelLayout {
  int64_t tensor_parallel = 1;      // ranks splitting each layer (on one node)
  int64_t pipeline_parallel = 1;    // stages the blocks are cut into
  int64_t pipeline_chunks = 1;      // model chunks per stage: > 1 runs interleaved 1F1B
  int64_t data_parallel = 1;        // model replicas: the GPUs / (tensor x pipeline)
  Sharding sharding = Sharding::None;  // over the data-parallel ranks
  int64_t micro_batch_size = 1;     // sequences per micro-batch
  int64_t num_micro_batches = 1;    // per step and replica (the pipeline's m; accumulation without one)
  int64_t checkpoint_every = 0;     // activation recomputation: 0 = none, k = every k-th block
  double predicted_peak_bytes = 0;  // per GPU, on the stage that needs the most
  double predicted_step_seconds = 0;
  double predicted_mfu = 0;         // model FLOPs (no recomputation) / (GPUs x peak x step time)
  std::string name() const;         // "tp8 x pp8 x dp24"
  std::string summary() const;      // "tp8 x pp8 x dp24, zero1, micro-batch 1 x 96, recompute every block"
                                    // (", 2 chunks per stage" when interleaved)
};

// A layout the search weighed: why it won or lost ("1.23x slower (bubble 18%)", "does not fit: ...").
struct LayoutOption {
  ParallelLayout layout;
  bool fits = true;
  std::string verdict;
};

struct Decision {
  std::string name;    // "precision"
  std::string value;   // "bf16 autocast"
  std::string reason;  // "CPU has AVX512_BF16 and bf16 GEMM measured 2.9x fp32"
};

// Eager steps before a plan with cuda_graphs captures its step (allocator, handles and moments settle).
inline constexpr int64_t kCudaGraphWarmupSteps = 3;

struct Plan {
  c10::Device device{c10::kCPU};
  Precision precision = Precision::Fp32;
  bool pure_bf16_weights = false;  // bf16 weights with fp32 optimizer moments
  bool hardware_bf16 = false;      // the device runs bf16 natively (for the precision status)
  bool hardware_fp16 = false;
  LossScaling loss_scaling;
  AutocastSwitches autocast;
  AttentionKernel attention = AttentionKernel::Sdpa;
  int64_t checkpoint_every = 0;    // activation checkpointing: 0 = none, k = every k-th block
  bool fused_lm_head_loss = false; // chunked LM head + cross-entropy (model/lm_head_loss.h)
  int64_t micro_batch_size = 1;
  int64_t grad_accum_steps = 1;
  int64_t world_size = 1;
  int64_t intra_op_threads = 1;
  int64_t num_workers = 1;         // data loader threads
  int64_t prefetch_factor = 2;
  bool pin_memory = false;
  bool allow_tf32 = false;
  bool cudnn_benchmark = false;
  bool deterministic = false;      // deterministic algorithms only (at::Context, cuBLAS workspace)
  bool fused_optimizer = true;
  OptimizerStep optimizer_step = OptimizerStep::AfterBackward;
  bool cuda_graphs = false;        // the step captured as one CUDA graph after warm-up (train/cuda_graph_step.h)
  Sharding sharding = Sharding::None;
  ReduceDtype gradient_reduce = ReduceDtype::Fp32;  // ZeRO-2/3's reduce-scatter dtype (dist.reduce_dtype)
  bool deferred_init = false;      // the model built unit by unit into the shards (model/deferred_init.h)
  bool auto_batch_size = false;    // probe the largest micro-batch before training
  StateDevice optimizer_state_device = StateDevice::Device;
  StateDtype optimizer_state_dtype = StateDtype::Fp32;
  double memory_budget_bytes = 0;     // memory_threshold x available memory
  double predicted_peak_bytes = 0;    // memory model's estimate for the chosen settings
  double peak_flops = 0;              // hardware peak at the chosen precision (for MFU)
  // Multi-GPU plans: the chosen parallel layout (plan.json "parallel_layout"), and the layouts the
  // search weighed, best first, then one of each other reason for losing (printed by `hwtrain plan`;
  // not saved).
  std::optional<ParallelLayout> layout;
  std::vector<LayoutOption> layouts_considered;
  std::vector<Decision> decisions;    // in the order they were made
  std::vector<std::string> warnings;  // user settings overridden or impossible, with the fallback

  bool on_gpu() const { return device.is_cuda(); }
  bool optimizer_in_backward() const { return optimizer_step == OptimizerStep::InBackward; }
  int64_t global_batch_size() const { return micro_batch_size * grad_accum_steps * world_size; }
  void decide(const std::string& name, const std::string& value, const std::string& reason) {
    decisions.push_back({name, value, reason});
  }
  std::string to_text() const;  // aligned "name  value  (reason)" lines
  // The layouts the search weighed, a table ("" without any): the chosen one, the best few and an
  // example of each other reason for losing, with memory per rank, predicted step time and MFU.
  std::string layouts_text() const;
  std::string to_json() const;
  static Plan from_json(const std::string& json);  // throws ConfigError on malformed input
};

}  // namespace hwt
