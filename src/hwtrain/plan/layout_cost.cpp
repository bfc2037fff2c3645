// The cost model of one parallel layout (see layout_cost.h).
//
// Letters: L blocks, C the model width, T the sequence length, V the vocabulary, P_b the parameters
// of one block, t / p / d the tensor, pipeline and data-parallel sizes, b the micro-batch and m the
// micro-batches per step and replica.
#include "hwtrain/plan/layout_cost.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace hwt {

namespace {

// The share of the dense peak that a large transformer's GEMMs reach in training. Calibrated on
// Megatron-LM's Table 1 (Narayanan et al. 2021; tests/run/parallel_layout_test.cpp): with the bubble
// and communication below counted, 0.6 reproduces their 145B-1T rows on A100s within 10%. Eager
// LibTorch on smaller models reaches less (torchtitan's Llama 3 8B: 33-39% MFU on H100s), so the
// absolute step times are optimistic there; the ranking of layouts is what the planner uses.
constexpr double kGemmEfficiency = 0.6;
// NCCL ring collectives reach about this share of a link's data-sheet bandwidth (bus bandwidth of
// all-reduce in nccl-tests on DGX nodes); assumed, not measured here.
constexpr double kLinkEfficiency = 0.8;
// Gradients are reduced in buckets of this size (dist.bucket_size_mb's default), one collective each.
constexpr double kBucketBytes = 25e6;
// Gradients are reduced in fp32 (the trainer keeps fp32 gradients; dist/ddp.h, dist/zero1.h).
constexpr double kGradientBytes = 4.0;

// One stage of the pipeline: its blocks, whether it holds the embedding and the LM head, and how many
// micro-batches' activations it holds at once under 1F1B (stage s of p: min(p - s, m)).
struct Stage {
  int64_t blocks = 0;
  bool embedding = false;  // the first stage's (vocabulary-parallel under TP)
  bool head = false;
  int64_t in_flight = 1;
  double parameters = 0;  // whole, before the tensor split
};

struct ModelCounts {
  double block = 0;       // P_b
  double total = 0;
  double embedding = 0;   // token (and gpt2's position) embedding
  double head = 0;        // V x C: the head, or on a last stage the tied embedding's copy
  double head_own = 0;    // untied head's parameters in `total`
  double rest = 0;        // final norm
};

ModelCounts count(const ModelConfig& m) {
  ModelConfig one = m, none = m;
  one.n_layer = 1;
  none.n_layer = 0;
  ModelCounts c;
  c.block = static_cast<double>(gpt_num_parameters(one) - gpt_num_parameters(none));
  c.total = static_cast<double>(gpt_num_parameters(m));
  c.head = static_cast<double>(m.vocab_size * m.n_embd);
  c.embedding = c.head + (m.is_llama() ? 0.0 : static_cast<double>(m.block_size * m.n_embd));
  c.head_own = m.tied_head() ? 0.0 : c.head;
  c.rest = c.total - static_cast<double>(m.n_layer) * c.block - c.embedding - c.head_own;
  return c;
}

// The first stage (which is the whole model when p = 1) and the last one: the two that can need the
// most memory (the first holds the most micro-batches, the last the head and logits) and time.
std::vector<Stage> stages(const ModelConfig& m, const ParallelLayout& l) {
  const ModelCounts c = count(m);
  const int64_t p = l.pipeline_parallel, layers = m.n_layer;
  Stage first;
  first.blocks = (layers + p - 1) / p;  // the first L mod p stages take one block more
  first.in_flight = std::min(p, l.num_micro_batches);
  first.embedding = true;
  first.head = p == 1;
  first.parameters = static_cast<double>(first.blocks) * c.block + c.embedding + (p == 1 ? c.head_own + c.rest : 0.0);
  if (p == 1) return {first};
  Stage last;
  last.blocks = layers / p;
  last.head = true;
  last.parameters = static_cast<double>(last.blocks) * c.block + c.head + c.rest;
  return {first, last};
}

bool low_precision(const MemoryQuery& q) { return q.precision != Precision::Fp32; }

// Autocast's 16-bit weight copies, which the memory model counts with the activations (2 bytes a
// parameter in bf16/fp16 unless ZeRO-2/3 already computes in 16-bit weights).
double weight_copy_bytes(const MemoryQuery& q, double parameters) {
  const bool sixteen_bit_weights = q.sharding == Sharding::Zero2 || q.sharding == Sharding::Zero3;
  return low_precision(q) && !sixteen_bit_weights ? 2.0 * parameters : 0.0;
}

// What one tensor rank keeps of `held` (the activations, autocast's weight copies taken out), from
// Korthikanti et al. 2022, Table 2: sequence parallelism splits everything by t; without it, of a
// block's 34 s b h saved bytes the 10 s b h of the norms' inputs and outputs and the dropout masks
// stay whole on every rank ((10 + 24/t) / 34 of them per rank), and so does the residual stream
// (the recomputed blocks' inputs, backward's transients). Those figures are GPT's; a Llama block
// (no dropout, RMSNorm) keeps somewhat less whole.
double rank_activations(bool sequence_parallel, const MemoryQuery& q, double held, double t) {
  if (sequence_parallel) return held / t;
  const double stream = residual_stream_activation_bytes(q);
  return (held - stream) * (10.0 + 24.0 / t) / 34.0 + stream;
}

// The memory model's terms for the stage's blocks (the model states) and for its blocks times the
// micro-batches in flight (the activations), scaled to one tensor-parallel rank: model states by its
// share of the parameters, attention and logits by 1/t (the head and cross-entropy are vocabulary-
// parallel), the other activations as rank_activations says.
MemoryEstimate stage_memory(const MemoryQuery& base, bool sequence_parallel, const ParallelLayout& l, const Stage& s) {
  MemoryQuery q = base;
  q.micro_batch_size = l.micro_batch_size;
  q.checkpoint_every = l.checkpoint_every;
  q.sharding = l.sharding;
  q.world_size = l.data_parallel;
  if (l.tensor_parallel > 1) q.fused_lm_head_loss = false;  // the head is vocabulary-parallel, never chunked
  const double t = static_cast<double>(l.tensor_parallel), rank_params = s.parameters / t;
  q.model.n_layer = s.blocks;
  const MemoryEstimate states = estimate_memory(q);
  const double share = rank_params / static_cast<double>(gpt_num_parameters(q.model));
  q.model.n_layer = s.blocks * s.in_flight;
  const MemoryEstimate held = estimate_memory(q);
  MemoryEstimate e;
  e.parameters = states.parameters * share;
  e.gradients = states.gradients * share;
  e.optimizer = states.optimizer * share;
  e.buffers = states.buffers * share;
  const double copies = weight_copy_bytes(q, static_cast<double>(gpt_num_parameters(q.model)));
  // Interleaved 1F1B keeps more chunks in flight (train/pipeline_step.cpp's warm-up): the first
  // stage 2(p - 1) + (v - 1)p + 1 chunks, 1 + (p - 1)/(p v) times its p micro-batches; the last
  // (v - 1)p + 1 (its warm-up runs the earlier chunks), ((v - 1)p + 1)/v micro-batches' worth. The
  // head's logits are one micro-batch's still: its backward follows each of its forwards.
  const double p = static_cast<double>(l.pipeline_parallel), v = static_cast<double>(l.pipeline_chunks);
  double interleaved = 1.0;
  if (l.pipeline_chunks > 1) interleaved = s.in_flight > 1 ? 1.0 + (p - 1.0) / (p * v) : ((v - 1.0) * p + 1.0) / v;
  e.activations = interleaved * rank_activations(sequence_parallel, q, held.activations - copies, t) +
                  weight_copy_bytes(q, rank_params);
  e.attention = interleaved * held.attention / t;
  e.logits = s.head ? held.logits / t : 0.0;
  e.overhead = held.overhead;
  return e;
}

double bytes_per_second(double gbs) { return std::max(gbs, 1e-3) * 1e9 * kLinkEfficiency; }

// Ring all-reduce moves 2(n-1)/n of the buffer through each GPU's link.
double ring_all_reduce(double n) { return n > 1 ? 2.0 * (n - 1.0) / n : 0.0; }

double hidden_behind(double comm, double gemm) { return std::max(0.0, comm - gemm); }

// Tensor-parallel communication that one micro-batch waits for in one stage (model/tensor_parallel.h,
// model/column_parallel.h). A collective costs its latency plus its bytes over NVLink at ring cost:
// an all-gather or a reduce-scatter moves (t - 1) / t of the activation, an all-reduce twice that.
// Per block, with sequence parallelism (dist.sequence_parallel, the default): in forward an
// all-gather before each of the two column-parallel groups (attention's q, k, v; the MLP's up and
// gate) and a reduce-scatter after each row-parallel layer, all waited for; in backward the
// row-parallel layer's all-gather of its output gradient (waited for), then the column group's
// all-gather of its saved input slice, which runs while the input gradient's GEMM is computed, and
// the reduce-scatter of that gradient, which runs while the weight gradient's GEMM is computed: only
// what exceeds its GEMM shows. Without sequence parallelism: an all-reduce after each row-parallel
// layer in forward, and each column group's input-gradient all-reduce behind its weight-gradient
// GEMM. A recomputed block pays its forward's collectives again. A machine that does not hide
// collectives (CPU processes) waits for all of them. On the last stage the vocabulary-
// parallel head is one more column group, and the loss adds two small collectives (latency only);
// on the first, the vocabulary-parallel embedding sums its rows over the group.
double tensor_parallel_seconds(const LayoutProblem& problem, const ParallelLayout& l, const Stage& s,
                               double recomputed) {
  const ModelConfig& m = problem.base.model;
  const LayoutMachine& hw = problem.machine;
  const bool sp = problem.sequence_parallel;
  const double t = static_cast<double>(l.tensor_parallel), c = static_cast<double>(m.n_embd);
  const double tokens = static_cast<double>(l.micro_batch_size * m.block_size);
  // A tensor group wider than a node (only a mesh the user fixed: the search keeps TP within one)
  // all-reduces over the inter-node links.
  const double link = bytes_per_second(l.tensor_parallel > hw.gpus_per_node ? hw.inter_node_gbs : hw.nvlink_gbs);
  const double lat = hw.collective_latency_s;
  // Activations travel in the compute dtype; the column groups' input gradients and the embedding's
  // output in fp32 (the norms' outputs and the embedding stay fp32 under autocast).
  const double bytes = tokens * c * (low_precision(problem.base) ? 2.0 : 4.0), bytes32 = tokens * c * 4.0;
  const double half = lat + (t - 1.0) / t * bytes / link, half32 = lat + (t - 1.0) / t * bytes32 / link;
  const double whole = lat + ring_all_reduce(t) * bytes / link, whole32 = lat + ring_all_reduce(t) * bytes32 / link;
  const double rate = hw.peak_flops * kGemmEfficiency;
  auto gemm = [&](double width) { return 2.0 * tokens * c * width / t / rate; };  // one backward GEMM, one rank
  // One column group's backward collectives as they show, for its output width (whole, before the split).
  auto column_backward = [&](double width) {
    if (!hw.hides_collectives) return sp ? half + half32 : whole32;
    return sp ? hidden_behind(half, gemm(width)) + hidden_behind(half32, gemm(width)) : hidden_behind(whole32, gemm(width));
  };
  const double kv = static_cast<double>(m.kv_heads() * m.head_dim()), mlp = static_cast<double>(m.mlp_width());
  const double attention_width = m.is_llama() ? c + 2.0 * kv : 3.0 * c, mlp_width = m.is_llama() ? 2.0 * mlp : mlp;
  const double forward = sp ? 4.0 * half : 2.0 * whole;
  const double backward = (sp ? 2.0 * half : 0.0) + column_backward(attention_width) + column_backward(mlp_width);
  double seconds = static_cast<double>(s.blocks) * (forward + backward) + recomputed * forward;
  if (s.head) seconds += 2.0 * lat + (sp ? half : 0.0) + column_backward(static_cast<double>(m.vocab_size));
  // The vocabulary-parallel embedding's partial rows summed: a reduce-scatter and, in backward, an
  // all-gather of its gradient; without sequence parallelism an all-reduce in forward alone.
  if (s.embedding) seconds += sp ? 2.0 * half32 : whole32;
  return seconds;
}

// One micro-batch through one stage on one GPU: forward and backward, recomputation, its tensor-
// parallel collectives (above) and its sends to the neighbouring stages.
LayoutTime stage_step(const LayoutProblem& problem, const ParallelLayout& l, const Stage& s) {
  const ModelConfig& m = problem.base.model;
  const LayoutMachine& hw = problem.machine;
  const double t = static_cast<double>(l.tensor_parallel);
  const double tokens = static_cast<double>(l.micro_batch_size * m.block_size);
  const double c = static_cast<double>(m.n_embd);
  const double block_forward = 2.0 * count(m).block + 4.0 * static_cast<double>(m.block_size) * c;  // per token
  const double head_forward = s.head ? 2.0 * static_cast<double>(m.vocab_size) * c : 0.0;
  const double rate = hw.peak_flops * kGemmEfficiency * t;
  const int64_t recomputed = l.checkpoint_every > 0 ? (s.blocks + l.checkpoint_every - 1) / l.checkpoint_every : 0;
  LayoutTime step;
  step.compute = 3.0 * (static_cast<double>(s.blocks) * block_forward + head_forward) * tokens / rate;
  step.recompute = static_cast<double>(recomputed) * block_forward * tokens / rate;
  const double activation_bytes = tokens * c * (low_precision(problem.base) ? 2.0 : 4.0);
  if (l.tensor_parallel > 1) step.tensor_comm = tensor_parallel_seconds(problem, l, s, static_cast<double>(recomputed));
  if (l.pipeline_parallel > 1) {  // stages cross nodes once tensor x pipeline ranks exceed a node
    const bool across_nodes = l.tensor_parallel * l.pipeline_parallel > hw.gpus_per_node;
    const double link = bytes_per_second(across_nodes ? hw.inter_node_gbs : hw.nvlink_gbs);
    // Each chunk sends its activations on and their gradients back: v times per micro-batch.
    step.pipeline_comm = 2.0 * static_cast<double>(l.pipeline_chunks) * (hw.collective_latency_s + activation_bytes / t / link);
  }
  return step;
}

// The data-parallel gradient reduce after the step (not overlapped with backward), over the
// inter-node links once the job spans nodes; ZeRO-1/2 reduce-scatter the gradients and all-gather
// the parameters, the same volume. ZeRO-3 also gathers each micro-batch's parameters twice (forward
// and backward), prefetched behind compute: only what exceeds the pipeline's time shows.
double data_parallel_seconds(const LayoutProblem& problem, const ParallelLayout& l, double rank_params,
                             double pipeline_seconds) {
  const double d = static_cast<double>(l.data_parallel);
  if (l.data_parallel <= 1) return 0.0;
  const LayoutMachine& hw = problem.machine;
  const double bandwidth = bytes_per_second(hw.num_gpus > hw.gpus_per_node ? hw.inter_node_gbs : hw.nvlink_gbs);
  const double buckets = std::ceil(rank_params * kGradientBytes / kBucketBytes);
  double seconds = buckets * hw.collective_latency_s + ring_all_reduce(d) * rank_params * kGradientBytes / bandwidth;
  if (l.sharding == Sharding::Zero3) {
    const double compute_bytes = low_precision(problem.base) ? 2.0 : 4.0;
    const double gathers = 2.0 * static_cast<double>(l.num_micro_batches) * (d - 1.0) / d * rank_params *
                           compute_bytes / bandwidth;
    seconds += std::max(0.0, gathers - pipeline_seconds);
  }
  return seconds;
}

}  // namespace

double layout_gemm_efficiency() { return kGemmEfficiency; }

MemoryEstimate split_memory(const MemoryQuery& base, const ParallelLayout& l, bool sequence_parallel) {
  MemoryEstimate most;
  for (const Stage& s : stages(base.model, l)) {
    const MemoryEstimate e = stage_memory(base, sequence_parallel, l, s);
    if (e.total() > most.total()) most = e;
  }
  return most;
}

LayoutPrediction predict_layout(const LayoutProblem& problem, const ParallelLayout& l) {
  LayoutPrediction out;
  const std::vector<Stage> all = stages(problem.base.model, l);
  LayoutTime slowest;
  double most_params = 0;
  out.memory = split_memory(problem.base, l, problem.sequence_parallel);
  for (const Stage& s : all) {
    const LayoutTime step = stage_step(problem, l, s);
    if (step.total() > slowest.total()) slowest = step;
    most_params = std::max(most_params, s.parameters / static_cast<double>(l.tensor_parallel));
  }
  // 1F1B: m micro-batches through the slowest stage, plus p - 1 of its steps to fill and drain;
  // interleaved over v chunks, each fill or drain step is a chunk's: (p - 1) / v of them.
  const double m = static_cast<double>(l.num_micro_batches);
  LayoutTime& time = out.time;
  time.compute = m * slowest.compute;
  time.recompute = m * slowest.recompute;
  time.tensor_comm = m * slowest.tensor_comm;
  time.pipeline_comm = m * slowest.pipeline_comm;
  time.bubble = static_cast<double>(l.pipeline_parallel - 1) * slowest.total() / static_cast<double>(l.pipeline_chunks);
  time.data_comm = data_parallel_seconds(problem, l, most_params, time.total());
  const ModelConfig& model = problem.base.model;
  const double c = static_cast<double>(model.n_embd), tokens = static_cast<double>(problem.global_batch * model.block_size);
  const double block_forward = 2.0 * count(model).block + 4.0 * static_cast<double>(model.block_size) * c;
  const double forward = static_cast<double>(model.n_layer) * block_forward + 2.0 * static_cast<double>(model.vocab_size) * c;
  out.model_flops = 3.0 * forward * tokens;
  const int64_t every = l.checkpoint_every;
  const double recomputed = every > 0 ? static_cast<double>((model.n_layer + every - 1) / every) : 0.0;
  out.hardware_flops = out.model_flops + recomputed * block_forward * tokens;
  const double capacity = static_cast<double>(problem.machine.num_gpus) * problem.machine.peak_flops * time.total();
  out.mfu = capacity > 0 ? out.model_flops / capacity : 0.0;
  return out;
}

}  // namespace hwt
