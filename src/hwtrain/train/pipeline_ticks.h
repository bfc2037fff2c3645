// The interleaved 1F1B step in ticks, as Megatron-LM runs it with batched point-to-point
// (forward_backward_pipelining_with_interleaving with batch_p2p_comm), on every transport: where a
// send waits for its receive (NCCL) no send then waits on a receive that a later one holds up, and
// on Gloo it ran as fast as holding sends (docs/benchmarks.md) and frees each send in its tick.
// - Stage s runs its k-th forward (interleaved_action) at the step's tick k + s and its j-th
//   backward at tick b_s + j + s, b_s = 2 (p - s - 1) + (v - 1) p (plus p where m = p, the schedule
//   that runs every forward first): a tick holds a warm-up forward, a forward and a backward, or a
//   cool-down backward, in interleaved_one_f_one_b's order.
// - Every stage walks the step's ticks in order. After its compute each tick ends in one group
//   (TensorParallelComm::exchange): what the tick produced, sent, and what the neighbours produced
//   in the same tick, received; in a group activations go before gradients on both sides (over two
//   stages each direction carries both, and NCCL matches a pair's messages in order, not by tag).
// - Whatever a stage receives at tick T it uses at a later tick (the layout above gives it, checked
//   by the tests for p = 2..6, v = 2..4, m = p..4p), so tick T's groups need nothing from a later
//   tick: by induction over the ticks none waits forever, in whatever order a rank's groups run.
// Losses and gradients are one process's accumulated step's (within 1e-5 in the tests), the same to
// the bit whether messages match by tag (Gloo) or in order (NCCL). The host waits for each group in
// its tick (on NCCL a host-device sync per tick, where Megatron-LM only makes the stream wait): no
// overlap of a send with the next tick's compute (Megatron's overlap_p2p_comm is not done here),
// and no send outlives its tick.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "hwtrain/model/pipeline_stage.h"
#include "hwtrain/obs/metrics.h"
#include "hwtrain/train/pipeline_step.h"

namespace hwt {

struct PipelineTick {
  int64_t forward = -1, backward = -1;  // the stage's k-th forward and j-th backward; -1: none
};

// What stage `stage` computes at each of the step's ticks (the same count for every stage).
// Throws ConfigError as interleaved_one_f_one_b does.
std::vector<PipelineTick> interleaved_ticks(int64_t stage, int64_t stages, int64_t chunks, int64_t micro_batches);

// run_pipeline_step's contract for chunk_count() > 1 (run_pipeline_step calls it).
double run_interleaved_in_ticks(PipelineStage& stage, const torch::Tensor& x_NT, const torch::Tensor& y_NT,
                                int64_t micro_batch, int64_t micro_batches, torch::Device device,
                                const PipelineStepHooks& hooks, StepMetrics& m);

}  // namespace hwt
