// The cost model of one (data x pipeline x tensor) layout: the per-GPU memory of the pipeline stage
// that needs the most, and the predicted step time term by term (compute, recomputation, pipeline
// bubble, tensor-, pipeline- and data-parallel communication). plan/parallel_layout.h searches
// layouts with it. Memory reuses the memory model's calibrated terms (plan/memory_model.h), split
// by tensor parallelism and cut by stage; time counts FLOPs at a calibrated share of the peak and
// bytes over the links at ring cost. Interleaved 1F1B (v chunks per stage, Narayanan et al. 2021
// section 2.2): the bubble divided by v, v times the stage-to-stage messages, the first stage's
// activations times 1 + (p - 1) / (p v) (Korthikanti et al. 2022, section 4.2.3) and the last's
// ((v - 1) p + 1) / v micro-batches' worth (train/pipeline_step.cpp's warm-up). Overlap: the
// column-parallel backward's collectives are hidden behind its GEMMs up to their length, as the
// runtime runs them (model/column_parallel.h), and ZeRO-3's gathers behind the step; the rest of
// the communication is counted as exposed. What it does not model: kernel efficiency changing with
// the micro-batch or the TP-split GEMM width, compute slowed by the collectives sharing the GPU,
// the optimizer step, the data loader, and chunks of uneven size (the stage's blocks are costed as one).
#pragma once
#include <cstdint>
#include <optional>

#include "hwtrain/plan/memory_model.h"
#include "hwtrain/plan/plan.h"

namespace hwt {

// The cluster as the cost model sees it: GPUs, or CPU processes (plan/layout_decision.cpp).
struct LayoutMachine {
  int64_t num_gpus = 1;
  int64_t gpus_per_node = 1;
  double peak_flops = 0;           // per GPU, dense, at the plan's precision
  double nvlink_gbs = 0;           // GB/s per direction between GPUs of a node
  double inter_node_gbs = 0;       // GB/s per direction from one GPU to other nodes (unused on one node)
  double memory_budget_bytes = 0;  // per GPU: optimization.memory_threshold x its memory
  // What each collective or send costs at least, whatever its size: NCCL's small-message latency on
  // DGX-class nodes is about 10-30 us (nccl-tests); assumed, not measured. It keeps tensor parallelism
  // (4 collectives a block) from winning on models too small to need it.
  double collective_latency_s = 20e-6;
  // Whether a collective started before a GEMM runs while it computes: on GPUs NCCL has its own
  // stream and SMs. CPU processes: no, Gloo's transport shares the cores with the GEMMs (on 2 cores
  // the column-parallel overlap cut the time blocked in collectives by 28-35% and the step time by
  // nothing measurable; docs/benchmarks.md, 2026-11-27).
  bool hides_collectives = true;
};

// What the search is asked: the model and the plan's settings as a memory query (its micro-batch,
// checkpointing, sharding and world size are the layout's, set per candidate), the machine, the
// global batch, and the values the user fixed (empty = the search chooses).
struct LayoutProblem {
  MemoryQuery base;
  LayoutMachine machine;
  int64_t global_batch = 1;     // sequences per optimizer step
  int64_t max_micro_batch = 64;  // optimization.max_batch_size
  std::optional<int64_t> tensor_parallel, pipeline_parallel, pipeline_chunks, micro_batch_size, checkpoint_every;
  std::optional<Sharding> sharding;
  // dist.sequence_parallel (with TP): the norms' activations split too, and all-gather +
  // reduce-scatter in place of the all-reduces (see layout_cost.cpp's tensor_parallel_seconds).
  bool sequence_parallel = true;
  const char* devices = "GPUs";  // what the machine's ranks are, for the search's description
};

// Seconds per optimizer step, term by term, on the critical path (the slowest stage).
struct LayoutTime {
  double compute = 0;        // forward + backward of every micro-batch
  double recompute = 0;      // the forward again where activations were not kept
  double bubble = 0;         // pipeline fill and drain: (p - 1) / v stage steps (v chunks per stage)
  double tensor_comm = 0;    // TP collectives over NVLink, as far as they are not hidden behind GEMMs
  double pipeline_comm = 0;  // activations and their gradients sent between stages
  double data_comm = 0;      // gradient reduce over the data-parallel ranks (and ZeRO-3 gathers not hidden)
  double total() const { return compute + recompute + bubble + tensor_comm + pipeline_comm + data_comm; }
};

struct LayoutPrediction {
  MemoryEstimate memory;  // per GPU, of the stage that needs the most
  LayoutTime time;
  double model_flops = 0;     // per step, all GPUs: 3 x forward, no recomputation (as MFU counts)
  double hardware_flops = 0;  // with the recomputed forward (as Megatron-LM's teraFLOP/s count)
  double mfu = 0;             // model_flops / (GPUs x peak x step time)
};

// Memory and time of `layout` (its tensor, pipeline and data sizes, sharding, micro-batch and
// checkpointing; its predictions are ignored). The layout must be valid for the problem.
LayoutPrediction predict_layout(const LayoutProblem& problem, const ParallelLayout& layout);

// The per-GPU memory of the stage of `layout` that needs the most, as predict_layout counts it: the
// memory model's terms of `base` (its micro-batch, checkpointing, sharding and world size replaced by
// the layout's) split by tensor parallelism (with or without sequence parallelism) and cut by stage.
MemoryEstimate split_memory(const MemoryQuery& base, const ParallelLayout& layout, bool sequence_parallel);

// The share of the peak the GEMMs reach (see layout_cost.cpp for its calibration).
double layout_gemm_efficiency();

}  // namespace hwt
