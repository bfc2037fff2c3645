// The planner's decisions, one function each. Each reads the typed inputs (hardware, the user's
// intent, the launch) and the plan as decided so far, sets its fields of the plan and records its
// decision with the reason. make_plan (plan/planner.cpp) calls them in one fixed order, written
// there once; a decision may read only what an earlier one decided.
//
// To add a decision: a decide_* function here, in the file of its kind (device_decisions.cpp:
// where and with what the step runs; memory_decisions.cpp: what must fit the memory budget;
// optimizer_decisions.cpp: where and when the optimizer steps), called from make_plan in order.
#pragma once
#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/plan/memory_model.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/plan/plan_intent.h"
#include "hwtrain/plan/planner.h"

namespace hwt {

struct PlanInputs {
  const HardwareProfile& hw;
  const PlanIntent& want;
  const PlanContext& ctx;
};

// The GPU this rank would use (local rank modulo the node's GPUs), or null without one.
const GpuInfo* local_gpu(const PlanInputs& in);
// The plan's GPU once the device is decided: null when the plan runs on the CPU.
const GpuInfo* plan_gpu(const Plan& p, const PlanInputs& in);

// The run's processes on this machine that share its cores and memory: on the CPU all of them (each
// plans with its share); a GPU rank trains on memory of its own and keeps the host's cores: 1.
int64_t ranks_sharing_host(const Plan& p, const PlanInputs& in);

// device_decisions.cpp
void decide_device(Plan& p, const PlanInputs& in);
void decide_threads(Plan& p, const PlanInputs& in);
void decide_loader(Plan& p, const PlanInputs& in);
void decide_gpu_settings(Plan& p, const PlanInputs& in);  // pinned memory, TF32, cuDNN, CUDA graphs
void decide_cuda_graphs(Plan& p, const PlanInputs& in);   // the step as one CUDA graph, or why not
void decide_mfu_peak(Plan& p, const PlanInputs& in);
// On the CPU: the dense GEMM rate one rank can reach at the plan's precision on its threads (the
// probe's, scaled; the ISA's when the probe was contended or not run), and where it comes from.
struct CpuRankPeak {
  double flops = 0;
  std::string reason;  // "measured bf16 GEMM on 16 threads, scaled to this rank's 8"
};
// `for_mfu`: MFU's denominator, where emulated bf16 counts against the faster fp32 rate.
CpuRankPeak cpu_rank_peak(const Plan& p, const PlanInputs& in, bool for_mfu = false);

// precision_decision.cpp: precision, loss scaling and the bf16-weights choice.
void decide_precision(Plan& p, const PlanInputs& in);
void decide_weights(Plan& p, const PlanInputs& in);

// memory_decisions.cpp
void decide_memory_budget(Plan& p, const PlanInputs& in);  // no decision line; the memory line says it
// layout_decision.cpp: the (data x pipeline x tensor) layout of a multi-GPU plan (plan/parallel_layout.h).
// On the CPU only for a run that asks (dist.tensor_parallel / pipeline_parallel = auto): its ranks are processes.
void decide_parallel_layout(Plan& p, const PlanInputs& in);  // sets p.layout; none on one device
bool plan_splits_model(const Plan& p);                        // the layout has tensor or pipeline parallelism
// For such a layout: its sharding, attention, head, recomputation, batch and memory lines, instead of
// the whole-model decisions below.
void apply_parallel_layout(Plan& p, const PlanInputs& in);
// For a mesh fixed before planning that splits the model, after the decisions below: the layout of
// the run's mesh with their values, its predicted step time and MFU, and what the search would choose.
void describe_fixed_layout(Plan& p, const PlanInputs& in);
// For a data-parallel layout, after the decisions below: the layout takes their values and predictions.
void match_data_parallel_layout(Plan& p, const PlanInputs& in);
// sharding_decision.cpp: what the data-parallel ranks shard (dist.sharding, or the least that fits).
void decide_sharding(Plan& p, const PlanInputs& in);
void decide_attention(Plan& p, const PlanInputs& in);
void decide_lm_head(Plan& p, const PlanInputs& in);
// Under tensor parallelism the head is vocabulary-parallel, never chunked: sets the plan's head
// unfused (warning when the user asked for the fused one) and returns the decision's reason.
std::string vocabulary_parallel_head(Plan& p, const PlanInputs& in, int64_t tensor_parallel);
void decide_batch_and_checkpointing(Plan& p, const PlanInputs& in);  // micro-batch, recomputation, accumulation
void decide_memory(Plan& p, const PlanInputs& in);                   // the predicted peak for all of it

// optimizer_decisions.cpp
// Refuses an optimizer placement the launch or the planned precision cannot run (ConfigError).
void check_optimizer_step(const Plan& p, const PlanInputs& in);
void decide_gradient_reduce(Plan& p, const PlanInputs& in);  // ZeRO-2/3's reduce dtype (dist.reduce_dtype)
void decide_model_init(Plan& p, const PlanInputs& in);       // built whole, or unit by unit into the shards
void decide_optimizer(Plan& p, const PlanInputs& in);  // kernel, step placement, state device

// The memory query of the plan so far at `micro` sequences and checkpointing `every` k-th block.
MemoryQuery memory_query(const Plan& p, const PlanInputs& in, int64_t micro, int64_t every);
// The mesh fixed before planning that splits the model (PlanContext::model_parallel > 1): its tensor
// and pipeline sizes, data-parallel ranks and chunks per stage; nullopt for any other plan.
std::optional<ParallelLayout> fixed_mesh(const PlanInputs& in);
// The memory model's estimate of `q` per rank. On a mesh fixed before planning that splits the model
// (PlanContext::model_parallel > 1: the run's dist.tensor_parallel x pipeline_parallel), the rank of
// the stage that needs the most, as the layout search counts it (plan/layout_cost.h's split_memory),
// with the micro-batches per step that decide_batch_and_checkpointing chooses for q's micro-batch.
MemoryEstimate rank_memory(const PlanInputs& in, const MemoryQuery& q);
// " on each rank of the fixed tp2 x pp2 mesh" for such a mesh, else "".
std::string fixed_mesh_text(const PlanInputs& in);
// On a fixed pipeline mesh whose micro-batch and accumulation the planner chooses: the micro-batch
// up to `largest` (the largest that feeds the stages) and the recomputation (unless the user set it)
// that the layout search predicts fastest for the mesh, where a smaller bubble pays for more
// micro-batches; nullopt on other plans or when nothing fits.
struct PipelineMicroBatch {
  int64_t micro = 1, every = 0;
  std::string reason, every_reason;
};
std::optional<PipelineMicroBatch> fastest_pipeline_micro_batch(const Plan& p, const PlanInputs& in, int64_t largest);
// Global batch the user asked for, in sequences, and its share per rank.
int64_t target_batch_size(const PlanInputs& in);
int64_t per_rank_target(const PlanInputs& in);

}  // namespace hwt
