// The planner's parallel-layout decision (plan/decisions.h): on several GPUs, the (data x pipeline x
// tensor) layout plan/parallel_layout.h finds fastest within the memory budget. A layout that splits
// the model (tensor or pipeline parallel) also sets the sharding, micro-batch, recomputation and
// memory lines, since the whole-model decisions cannot see its per-stage memory; a data-parallel
// layout leaves them to those decisions and is then brought in line with what they chose.
#include <algorithm>

#include "hwtrain/core/strings.h"
#include "hwtrain/hw/hardware_preset.h"
#include "hwtrain/model/lm_head_loss.h"
#include "hwtrain/plan/decisions.h"
#include "hwtrain/plan/parallel_layout.h"

namespace hwt {

namespace {

// Stand-ins where the hardware does not say: a PCIe 4.0 x16 link inside the node, and 100 Gb/s per
// GPU between nodes (a common Ethernet/RoCE NIC); the decision's reason says when they were used.
constexpr double kAssumedIntraNodeGbs = 32.0;
constexpr double kAssumedInterNodeGbs = 12.5;
// Gloo between processes of one machine (TCP over the loopback), as measured on 2 shared cores
// (bench/auto_layout_bench.sh, docs/benchmarks.md): a TP2 collective took 2.6-2.9 ms whether it moved
// 0.13 or 0.86 MiB, the ranks' skew included (every collective waits for the slower one), so about
// 2 ms a collective and 1.5 GB/s. Machines with idle cores for Gloo's threads wait less.
constexpr double kLoopbackGbs = 1.5;
constexpr double kGlooCollectiveSeconds = 2e-3;

// Every rank of the run: the data-parallel ones times a fixed mesh's ranks per replica.
int64_t all_ranks(const PlanInputs& in) { return in.ctx.world_size * std::max<int64_t>(1, in.ctx.model_parallel); }

int64_t gpus_per_node(const HardwareProfile& hw) {
  return std::max<int64_t>(1, static_cast<int64_t>(hw.gpus.size()) / std::max(1, hw.num_nodes));
}

// Dense peak at the plan's precision: TF32 tensor cores run fp32 matmuls at half the bf16 rate on
// A100/H100, which is what an fp32 plan gets on them.
double peak_flops(const Plan& p, const GpuInfo& gpu) {
  if (p.precision == Precision::Fp16) return gpu.peak_fp16_tflops * 1e12;
  return gpu.peak_bf16_tflops * 1e12 * (p.precision == Precision::Fp32 ? 0.5 : 1.0);
}

LayoutMachine gpu_machine(const Plan& p, const PlanInputs& in, const GpuInfo& gpu, std::string& assumed) {
  LayoutMachine m;
  m.num_gpus = all_ranks(in);
  // A node's ranks, not its GPUs, bound a tensor group: 4 ranks on an 8-GPU node cannot keep 8 together.
  const int64_t per_node = gpus_per_node(in.hw);
  const int64_t ranks = in.ctx.ranks_per_node > 0 ? std::min(per_node, in.ctx.ranks_per_node) : per_node;
  m.gpus_per_node = std::min(m.num_gpus, ranks);
  m.peak_flops = peak_flops(p, gpu);
  m.nvlink_gbs = gpu.link_bandwidth_gbs;
  m.inter_node_gbs = inter_node_gbs_per_gpu(in.hw);
  m.memory_budget_bytes = p.memory_budget_bytes;
  if (m.nvlink_gbs <= 0) {
    m.nvlink_gbs = kAssumedIntraNodeGbs;
    assumed += "; GPU link bandwidth unknown, " + format_number("%.0f", kAssumedIntraNodeGbs) + " GB/s assumed";
  }
  if (m.num_gpus > m.gpus_per_node && m.inter_node_gbs <= 0) {
    m.inter_node_gbs = kAssumedInterNodeGbs;
    assumed += "; inter-node bandwidth unknown, " + format_number("%.1f", kAssumedInterNodeGbs) + " GB/s per GPU assumed";
  }
  return m;
}

// CPU ranks are processes: each with its share of the cores' GEMM rate and of the memory
// (decide_memory_budget), talking through Gloo over the loopback inside a machine.
LayoutMachine cpu_machine(const Plan& p, const PlanInputs& in, std::string& assumed) {
  LayoutMachine m;
  m.num_gpus = all_ranks(in);
  m.gpus_per_node = std::min(m.num_gpus, ranks_sharing_host(p, in));
  const CpuRankPeak peak = cpu_rank_peak(p, in);
  m.peak_flops = peak.flops;
  m.nvlink_gbs = kLoopbackGbs;
  m.inter_node_gbs = kAssumedInterNodeGbs;
  m.collective_latency_s = kGlooCollectiveSeconds;
  m.hides_collectives = false;  // Gloo's transport runs on the cores the GEMMs use (docs/benchmarks.md)
  m.memory_budget_bytes = p.memory_budget_bytes;
  assumed += "; CPU processes: " + format_number("%.1f", peak.flops / 1e9) + " GFLOP/s each (" + peak.reason +
             "), Gloo over the loopback at " + format_number("%.1f", kLoopbackGbs) + " GB/s and " +
             format_seconds(kGlooCollectiveSeconds) + " a collective (measured on 2 shared cores)";
  return m;
}

// The batch the search trains: without optimization.target_batch_size, micro-batch x accumulation
// rows per model replica where the user's tensor and pipeline sizes fix the replicas (whether or
// not pipeline_chunks is left open), as a fixed mesh counts them; otherwise per GPU, so that every
// layout the search compares trains the same batch.
int64_t layout_global_batch(const PlanInputs& in) {
  int64_t batch = target_batch_size(in);
  if (in.want.target_batch_size > 0 || in.ctx.model_parallel > 1) return batch;  // fixed: already per replica
  if (in.want.tensor_parallel && in.want.pipeline_parallel) {
    const int64_t split = *in.want.tensor_parallel * *in.want.pipeline_parallel;
    if (split > 0 && in.ctx.world_size % split == 0) batch /= split;  // otherwise the search refuses the mesh
  }
  return batch;
}

LayoutProblem layout_problem(const Plan& p, const PlanInputs& in, std::string& assumed) {
  LayoutProblem problem;
  problem.base = memory_query(p, in, 1, 0);
  problem.base.attention = in.want.attention.value_or(AttentionKernel::Sdpa);  // decide_attention's GPU choice
  problem.base.fused_lm_head_loss = in.want.fused_lm_head_loss.value_or(false);
  problem.base.int8_moments = in.want.optimizer_state_dtype == StateDtype::Int8;
  const GpuInfo* gpu = plan_gpu(p, in);
  problem.machine = gpu ? gpu_machine(p, in, *gpu, assumed) : cpu_machine(p, in, assumed);
  if (!gpu) problem.devices = "CPU processes";
  problem.global_batch = layout_global_batch(in);
  problem.max_micro_batch = in.want.max_batch_size;
  problem.micro_batch_size = in.want.micro_batch_size;
  problem.checkpoint_every = in.want.checkpoint_every;
  problem.sharding = in.want.sharding;
  problem.tensor_parallel = in.want.tensor_parallel;  // set by the user: the search keeps them
  problem.pipeline_parallel = in.want.pipeline_parallel;
  problem.pipeline_chunks = in.want.pipeline_chunks;
  problem.sequence_parallel = in.want.sequence_parallel;
  return problem;
}

std::string runner_up(const std::vector<LayoutOption>& table) {
  for (size_t i = 1; i < table.size(); ++i) {
    if (table[i].fits) return "; runner-up " + table[i].layout.name() + ": " + table[i].verdict;
  }
  return "";
}

// Settings that need the whole model on every rank (or one micro-batch per step, which leaves a
// pipeline nothing to overlap): the whole-model decisions handle, or refuse, them.
const char* whole_model_setting(const Plan& p, const PlanInputs& in) {
  if (in.want.auto_batch_size) return "optimization.auto_batch_size";
  if (!in.ctx.paper && p.on_gpu() && in.want.optimizer_state_device == StateDevice::Host) {
    return "optimization.optimizer_state_device = cpu";
  }
  if (in.want.optimizer_step == OptimizerStep::InBackward) return "optimization.optimizer_in_backward";
  return nullptr;
}

bool splits_model(const ParallelLayout& l) { return l.tensor_parallel * l.pipeline_parallel > 1; }

std::string checkpoint_text(int64_t every) {
  return every == 0 ? "off" : every == 1 ? "every block" : "every " + std::to_string(every) + " blocks";
}

}  // namespace

bool plan_splits_model(const Plan& p) { return p.layout && splits_model(*p.layout); }

void decide_parallel_layout(Plan& p, const PlanInputs& in) {
  // A run's mesh comes from dist.tensor_parallel / dist.pipeline_parallel before it is planned
  // (cli/parallel_setup.h) unless one of them is auto; `hwtrain plan --gpus` plans described clusters.
  const bool run_asks = in.want.search_layout && !in.ctx.paper;
  if (!run_asks && !in.ctx.paper) return;
  if (in.ctx.paper && plan_gpu(p, in) == nullptr) return;
  const std::string whole = "tp1 x pp1 x dp" + std::to_string(in.ctx.world_size);
  if (in.ctx.world_size <= 1 || in.ctx.model_parallel > 1) {  // one device, or a mesh already fixed
    if (run_asks) p.decide("parallel_layout", whole, "one rank: nothing to split (dist.tensor_parallel = auto)");
    return;
  }
  if (const char* setting = whole_model_setting(p, in)) {
    if (run_asks) {
      p.decide("parallel_layout", whole, std::string(setting) + " needs the whole model on every rank, so data "
                                         "parallel alone (dist.tensor_parallel / pipeline_parallel = auto)");
    }
    return;
  }
  std::string assumed;
  const LayoutSearch search = search_parallel_layouts(layout_problem(p, in, assumed));
  p.layouts_considered = search.table;
  if (!search.chosen) return;  // nothing fits: the memory decisions refuse the model with what would fit
  p.layout = search.chosen->layout;
  p.decide("parallel_layout", p.layout->name(),
           search.chosen->verdict + runner_up(search.table) + "; searched " + search.searched + assumed);
}

void apply_parallel_layout(Plan& p, const PlanInputs& in) {
  const ParallelLayout& l = *p.layout;
  p.world_size = l.data_parallel;  // the plan's batch arithmetic counts model replicas
  p.sharding = l.sharding;
  p.optimizer_state_dtype = in.want.optimizer_state_dtype.value_or(StateDtype::Fp32);
  p.decide("sharding", sharding_name(p.sharding),
           std::string(in.want.sharding ? "dist.sharding set by user" : "the parallel layout's") + ", over its " +
               std::to_string(l.data_parallel) + " data-parallel ranks");
  decide_attention(p, in);
  p.fused_lm_head_loss = in.want.fused_lm_head_loss.value_or(false);
  const int64_t vocab = in.want.model.vocab_size;
  const std::string head = l.tensor_parallel > 1 ? vocabulary_parallel_head(p, in, l.tensor_parallel)
                                                 : std::string("the parallel layout's memory prediction assumed it");
  p.decide("lm_head_loss",
           p.fused_lm_head_loss ? "fused, chunks of " + std::to_string(lm_head_loss_chunk_tokens(vocab)) + " tokens"
                                : std::string("linear + cross_entropy"),
           head);
  p.checkpoint_every = l.checkpoint_every;
  p.decide("activation_checkpointing", checkpoint_text(l.checkpoint_every), "the parallel layout's");
  p.micro_batch_size = l.micro_batch_size;
  p.grad_accum_steps = l.num_micro_batches;
  if (l.pipeline_parallel > 1) {
    p.decide("pipeline_chunks", std::to_string(l.pipeline_chunks),
             std::string(in.want.pipeline_chunks ? "dist.pipeline_chunks set by user" : "the parallel layout's") +
                 (l.pipeline_chunks > 1 ? ": interleaved 1F1B, the bubble 1/" + std::to_string(l.pipeline_chunks) +
                                              " of plain 1F1B's for " + std::to_string(l.pipeline_chunks) +
                                              " times the stage-to-stage messages"
                                        : ": plain 1F1B"));
  }
  p.decide("micro_batch_size", std::to_string(l.micro_batch_size),
           in.want.micro_batch_size ? "train.micro_batch_size set by user" : "the parallel layout's");
  // A user's accumulation sets the global batch (as over data parallelism on every device), which
  // the layout divides among its replicas: their micro-batch count is the layout's.
  const std::string kept = in.want.grad_accum_steps
                               ? "; train.grad_accum_steps = " + std::to_string(*in.want.grad_accum_steps) +
                                     " set by user fixes the global batch (train.micro_batch_size x it x the " +
                                     "devices, or optimization.target_batch_size), not each replica's count"
                               : std::string();
  p.decide("grad_accum_steps", std::to_string(l.num_micro_batches),
           "global batch " + std::to_string(p.global_batch_size()) + " sequences = " +
               std::to_string(l.micro_batch_size) + " x " + std::to_string(l.num_micro_batches) + " micro-batches x " +
               std::to_string(l.data_parallel) + " replicas" +
               (l.pipeline_parallel > 1 ? " (the pipeline's m)" : std::string()) + kept);
  p.predicted_peak_bytes = l.predicted_peak_bytes;
  p.decide("memory", format_bytes(l.predicted_peak_bytes) + " predicted peak",
           "per rank on the stage that needs the most, budget " + format_bytes(p.memory_budget_bytes) +
               "; the memory model's terms split by tensor parallelism (sequence parallel) and cut by stage");
}

namespace {

// `l` given the plan's sharding, micro-batch, accumulation and recomputation, and the cost model's
// predictions for them; returns the problem it was predicted on.
LayoutProblem predict_planned(ParallelLayout& l, const Plan& p, const PlanInputs& in, std::string& assumed) {
  l.sharding = p.sharding;
  l.micro_batch_size = p.micro_batch_size;
  l.num_micro_batches = p.grad_accum_steps;
  l.checkpoint_every = p.checkpoint_every;
  LayoutProblem problem = layout_problem(p, in, assumed);
  problem.base = memory_query(p, in, 1, 0);  // the plan's own head, attention and moments
  problem.global_batch = p.global_batch_size();
  const LayoutPrediction prediction = predict_layout(problem, l);
  l.predicted_peak_bytes = prediction.memory.total();
  l.predicted_step_seconds = prediction.time.total();
  l.predicted_mfu = prediction.mfu;
  return problem;
}

}  // namespace

std::optional<PipelineMicroBatch> fastest_pipeline_micro_batch(const Plan& p, const PlanInputs& in, int64_t largest) {
  const std::optional<ParallelLayout> mesh = fixed_mesh(in);
  if (!mesh || mesh->pipeline_parallel <= 1 || in.want.grad_accum_steps || in.want.micro_batch_size) {
    return std::nullopt;
  }
  std::string assumed;
  LayoutProblem problem = layout_problem(p, in, assumed);
  problem.base = memory_query(p, in, 1, 0);  // the plan's own head, attention and moments
  problem.sharding = p.sharding;
  problem.tensor_parallel = mesh->tensor_parallel;
  problem.pipeline_parallel = mesh->pipeline_parallel;
  problem.pipeline_chunks = mesh->pipeline_chunks;
  problem.max_micro_batch = largest;  // micro-batches that feed the stages (feeds_pipeline)
  const LayoutSearch search = search_parallel_layouts(problem);
  if (!search.chosen) return std::nullopt;  // nothing fits: the memory decisions refuse it
  const ParallelLayout& l = search.chosen->layout;
  PipelineMicroBatch out;
  out.micro = l.micro_batch_size;
  out.every = l.checkpoint_every;
  out.every_reason = "the cost model's choice on this pipeline with micro-batch " + std::to_string(out.micro);
  out.reason = "the fastest the cost model predicts on this pipeline (" + std::to_string(l.num_micro_batches) +
               " micro-batches a step for " + std::to_string(l.pipeline_parallel) + " stages)";
  // Against the largest micro-batch that fits (what the planner took before weighing the bubble).
  const int64_t sequences = l.micro_batch_size * l.num_micro_batches;
  for (int64_t micro = largest; micro > out.micro; micro /= 2) {
    ParallelLayout as_large = l;
    as_large.micro_batch_size = micro;
    as_large.num_micro_batches = sequences / micro;
    if (sequences % micro != 0 || predict_layout(problem, as_large).memory.total() > p.memory_budget_bytes) continue;
    out.reason += "; micro-batch " + std::to_string(micro) + ", the largest that fits (" +
                  std::to_string(as_large.num_micro_batches) + " a step), would be " +
                  compare_layouts(problem, as_large, l);
    break;
  }
  return out;
}

void describe_fixed_layout(Plan& p, const PlanInputs& in) {
  const std::optional<ParallelLayout> mesh = fixed_mesh(in);
  if (!mesh) return;
  ParallelLayout l = *mesh;
  std::string assumed;
  const LayoutProblem problem = predict_planned(l, p, in, assumed);
  p.layout = l;
  std::string reason = "the run's mesh (dist.tensor_parallel, dist.pipeline_parallel set): predicted " +
                       format_seconds(l.predicted_step_seconds) + "/step, MFU " +
                       format_number("%.0f", 100.0 * l.predicted_mfu) + "%";
  // What the search would choose for the same batch and ranks (the sizes the user set left open).
  LayoutProblem open = problem;
  open.tensor_parallel = open.pipeline_parallel = open.pipeline_chunks = std::nullopt;
  const LayoutSearch search = search_parallel_layouts(open);
  if (search.chosen && search.chosen->layout.summary() != l.summary()) {
    reason += "; the layout search (dist.tensor_parallel, pipeline_parallel, pipeline_chunks = auto) would choose " +
              search.chosen->layout.summary() + ", against which this mesh is " +
              compare_layouts(open, l, search.chosen->layout);
  }
  p.decide("parallel_layout", l.name(), reason + assumed);
}

void match_data_parallel_layout(Plan& p, const PlanInputs& in) {
  if (!p.layout) return;
  std::string assumed;
  predict_planned(*p.layout, p, in, assumed);
}

}  // namespace hwt
