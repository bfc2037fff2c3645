// Pipeline-parallel training steps: the 1F1B schedule (PipeDream-Flush; Narayanan et al. 2021,
// Megatron-LM's default) and its execution on one stage.
// - one_f_one_b: stage s of p runs min(p - s - 1, m) warm-up forwards, then one forward and one
//   backward in turn, then the remaining backwards; at most p - s micro-batches' activations are
//   held at once, and the pipeline idles (p - 1) / (m + p - 1) of the step (the bubble).
// - interleaved_one_f_one_b: the same for stages of v model chunks (Narayanan et al. 2021, section
//   2.2; Megatron-LM's forward_backward_pipelining_with_interleaving): the micro-batches go through
//   the chunks in groups of p, stage s warms up with 2 (p - s - 1) + (v - 1) p forwards, and the
//   bubble shrinks v-fold, to (p - 1) / (v m + p - 1), for v times the point-to-point messages.
//   m must be a multiple of p.
// - run_pipeline_step: one step's m micro-batches through this stage (model/pipeline_stage.h):
//   activations go to the next stage and their gradients to the previous one with c10d send/recv;
//   the last stage computes the loss and starts backward; the loss is shared with every stage.
//   1F1B: sends asynchronous and receives blocking, a send and the receive from the same peer that
//   follows it issued as one group (NCCL's sends wait for their receives: two neighbours that each
//   sent first would wait forever), each send waited for (and its tensor freed) once its receipt is
//   certain. Interleaved: in ticks, each ending in one group of sends and receives
//   (train/pipeline_ticks.h); held sends wait in a cycle around the ring of virtual stages on NCCL.
//   Gradient accumulation is exact: each micro-batch's loss is scaled by 1/m, as one process does.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "hwtrain/model/pipeline_stage.h"
#include "hwtrain/obs/metrics.h"

namespace hwt {

enum class PipeOp { Forward, Backward };
struct PipeAction {
  PipeOp op;
  int64_t micro;
  int64_t chunk = 0;
  bool operator==(const PipeAction& o) const { return op == o.op && micro == o.micro && chunk == o.chunk; }
};

std::vector<PipeAction> one_f_one_b(int64_t stage, int64_t stages, int64_t micro_batches);
// The k-th forward (backward) of every stage of an interleaved schedule: the micro-batches in groups
// of `stages`, each group through every chunk in turn (backwards through the chunks in reverse).
PipeAction interleaved_action(PipeOp op, int64_t k, int64_t stages, int64_t chunks);
// Throws ConfigError unless micro_batches is a multiple of stages (named as train.grad_accum_steps).
std::vector<PipeAction> interleaved_one_f_one_b(int64_t stage, int64_t stages, int64_t chunks, int64_t micro_batches);
// one_f_one_b for one chunk, else interleaved_one_f_one_b.
std::vector<PipeAction> pipeline_schedule(int64_t stage, int64_t stages, int64_t chunks, int64_t micro_batches);

struct PipelineStepHooks {
  // The stage's forward under the step's autocast: PipelineStage::forward_stage, or the loss hook's.
  std::function<torch::Tensor(const torch::Tensor& input, const torch::Tensor& targets, int64_t chunk)> forward;
  // The last stage: backward from a micro-batch's loss (scaled by 1/m and by the loss scaler).
  std::function<void(const torch::Tensor& loss)> backward_loss;
  // Before each backward: whether it is the step's last (data-parallel reduction after it; with
  // chunks, the other chunks' gradients are final before it and are reduced with it).
  std::function<void(bool last)> before_backward;
};

// The step's mean loss on every stage: the last stage's sum of its micro-batches' losses, shared.
double pipeline_mean_loss(PipelineStage& stage, double loss_sum, int64_t micro_batches, torch::Device device);

// x_NT, y_NT: this replica's rows of the step (micro_batch x micro_batches). Collective over the
// stages. Returns the step's mean loss (the same on every stage).
double run_pipeline_step(PipelineStage& stage, const torch::Tensor& x_NT, const torch::Tensor& y_NT,
                         int64_t micro_batch, int64_t micro_batches, torch::Device device,
                         const PipelineStepHooks& hooks, StepMetrics& m);

}  // namespace hwt
