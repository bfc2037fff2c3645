// CudaGraphStep: the training step captured once as a CUDA graph and replayed for every later step
// (optimization.cuda_graphs). After the warm-up steps run eagerly (by then the caching allocator,
// cuBLAS/cuDNN handles and plans and AdamW's moments exist), the next step is recorded on a side
// stream into the graph's private memory pool (as Python's torch.cuda.graph does: synchronize,
// empty the cache, capture) and then replayed: every micro-batch's forward and backward, gradient
// clipping and the fused AdamW update become one launch, with no per-kernel launch cost and no host
// read inside. Each step copies its batch into the captured input tensors and its learning rate
// into a device scalar (AdamW's tensor-lr kernel), replays, and reads the micro-losses and the
// gradient norm back. In low precision a non-finite loss skips the update inside the graph (the
// fused kernel's found_inf), as the eager step skips it.
//
// Whatever cannot be captured runs eagerly, and says so once: a failed capture (an operation that
// reads the device from the host, memory, a library without graph support) is logged with its
// reason and this step and every later one run eagerly on the same data; a step whose shape or
// settings changed since capture (`signature`: precision, micro-batch, accumulation) or that meets
// an `obstacle` (a gradient sync, ZeRO shards, the optimizer in backward, fp16 loss scaling, which
// decides on the host) stops the replays the same way. The planner refuses those settings first.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/plan/plan.h"
#include "hwtrain/train/adamw.h"

namespace hwt {

// What the captured step runs, given by its owner (the Trainer).
struct GraphedStep {
  // The micro-steps' forward and backward over the step's rows [N, T] on the device, under autocast
  // without its cast cache (cached casts would be freed behind the graph); returns each micro-step's
  // loss, stacked [micro-steps], on the device. Called once, while capturing.
  std::function<torch::Tensor(const torch::Tensor& x_NT, const torch::Tensor& y_NT)> forward_backward;
  std::function<std::vector<torch::Tensor>()> parameters;
  std::function<AdamW&()> optimizer;
  double max_grad_norm = 0;                  // train.grad_clip; <= 0: measure only
  std::function<bool()> low_precision;       // a non-finite loss then keeps the last good weights
  std::function<std::string()> signature;    // what the capture baked in; a change stops replays
  std::function<std::string()> obstacle;     // why a step cannot be captured now ("" if it can)
};

struct GraphedStepResult {
  std::vector<double> micro_losses;  // each micro-step's loss, in order
  double grad_norm = 0;              // before clipping
  bool updated = true;               // false: a non-finite loss in low precision skipped AdamW
};

class CudaGraphStep {
 public:
  explicit CudaGraphStep(GraphedStep step, int64_t warmup_steps = kCudaGraphWarmupSteps);
  ~CudaGraphStep();
  CudaGraphStep(const CudaGraphStep&) = delete;
  CudaGraphStep& operator=(const CudaGraphStep&) = delete;

  // Whether the next step is for the graph: this process has run the warm-up's eager steps (a
  // resumed run warms up again) and nothing has stopped it. The owner counts its eager steps.
  bool wants() const { return !stopped_ && eager_steps_ >= warmup_; }
  void count_eager_step() { ++eager_steps_; }
  // Step `step_number` (1-based, for the log) from the graph, captured first where not yet done.
  // Empty when the graph could not run it (logged once): the caller runs this step eagerly, and
  // wants() is false from then on. The inputs are on the device; the graph keeps its own copies.
  std::optional<GraphedStepResult> run(const torch::Tensor& x_NT, const torch::Tensor& y_NT, double lr,
                                       int64_t step_number);
  // Stops the replays (logged with `why`) and frees the graph and the gradients in its pool.
  void stop(const std::string& why);

  bool captured() const { return graph_ != nullptr; }
  int64_t replays() const { return replays_; }
  const std::string& stop_reason() const { return stop_reason_; }

 private:
  struct Graph;  // the CUDA graph and its static tensors (CUDA builds)
  bool capture(const torch::Tensor& x_NT, const torch::Tensor& y_NT, int64_t step_number);
  void record(Graph& g);  // what the capture runs: micro-steps, the loss verdict, the update

  GraphedStep step_;
  int64_t warmup_;
  std::unique_ptr<Graph> graph_;
  bool stopped_ = false;
  std::string stop_reason_;
  int64_t replays_ = 0;
  int64_t eager_steps_ = 0;
};

}  // namespace hwt
