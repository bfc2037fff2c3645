// UpdatePlacement: where and when AdamW updates the weights within a training step, a type chosen
// once from the plan (Plan::optimizer_step), so that the Trainer's step asks its placement at four
// points and never tests which one it has:
//   begin_step      before the micro-steps (the in-backward hooks learn the learning rate)
//   runs_backward   after a micro-step's forward: whether its backward runs
//   check_redo      an OOM or a missing low-precision kernel: may the step be redone on the same data?
//   finish_step     after the micro-steps: sync, update (or what is left of it), the gradient norm
// UpdateAfterBackward: gradients complete (and synced across ranks) first, then one update by the
// rule of train/update_step.h. UpdateInBackward: per parameter from autograd hooks as gradients are
// made (train/optimizer_in_backward.h); what it cannot run with is refused when it is made.
// A later placement (offloaded or sharded optimizer) is another subclass.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "hwtrain/dist/gradient_sync.h"
#include "hwtrain/io/safetensors.h"
#include "hwtrain/obs/metrics.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/train/adamw.h"
#include "hwtrain/train/mixed_precision.h"

namespace hwt {

// Sharding as the trainer sees it. Both kinds: after each optimizer step `after_step` makes every
// rank's parameters current again. ZeRO-1 (dist/zero1.h): the optimizer keeps state for and
// updates only `owned`; checkpoints call `gather` (collective) so that rank 0 writes the whole
// optimizer state. ZeRO-2/3 (train/sharded_training.h): `optimizer` replaces the trainer's, over
// this rank's shards (`parameters`, whose gradients `global_norm` turns into the global norm), and
// checkpoints are sharded (train/sharded_checkpoint.h): each rank writes `local_weights` and its
// optimizer state into the directory rank 0 shares (`share_from_rank0`), then all meet (`barrier`).
// A model split over ranks (tensor or pipeline parallel) writes whole checkpoints instead: ZeRO-2/3
// `gather` their optimizer state like ZeRO-1, and `master_weights` gives the fp32 masters whole on
// the data group's rank 0 (collective) for the model to join over its own groups.
struct OptimizerSharding {
  std::vector<std::string> owned;
  std::function<void()> after_step;
  std::function<NamedTensors(const NamedTensors&)> gather;
  std::shared_ptr<AdamW> optimizer;
  std::function<std::vector<torch::Tensor>()> parameters;
  std::function<torch::Tensor(const torch::Tensor&)> global_norm;
  std::function<void(torch::Tensor&)> sum_across_ranks;
  std::function<NamedTensors()> local_weights;
  std::function<NamedTensors()> master_weights;
  std::function<std::string(const std::string& key, const std::string& value)> share_from_rank0;
  std::function<void(const std::string& what)> barrier;
};

// The parts of a step that the placements act on; owned by the Trainer, which outlives them.
struct UpdateParts {
  AdamW* optimizer = nullptr;
  MixedPrecision* precision = nullptr;
  std::function<std::vector<torch::Tensor>()> parameters;
  double grad_clip = 0;                              // train.grad_clip; <= 0: no clipping
  std::shared_ptr<GradientSync> grad_sync;           // data parallel; null in one process
  std::function<double(double)> loss_mean;           // data parallel: the loss averaged over ranks
  OptimizerSharding sharding;                        // ZeRO-1; empty otherwise
  // A model split over ranks (tensor or pipeline parallel): the global gradient norm from this
  // rank's, and fp16's inf/NaN verdict summed over the model's ranks; used where `sharding` has none.
  std::function<torch::Tensor(const torch::Tensor&)> model_parallel_norm;
  std::function<void(torch::Tensor&)> model_parallel_sum;
  bool model_parallel = false;  // tensor or pipeline parallel: ranks exchange activations in every micro-step
};

class UpdatePlacement {
 public:
  virtual ~UpdatePlacement() = default;
  virtual OptimizerStep kind() const = 0;
  virtual void begin_step(double lr) = 0;
  virtual bool runs_backward(const torch::Tensor& loss) = 0;
  // Throws HardwareError when the step cannot be redone; `step` is 1-based, for the message.
  virtual void check_redo(const std::exception& e, bool oom, int64_t step) const = 0;
  // Returns the gradient norm (NaN for a step that made none); `loss` may become the ranks' mean.
  // Sets m.loss_scale and m.optimizer_seconds (and adds communication to m.comm_seconds).
  virtual double finish_step(double& loss, double lr, StepMetrics& m) = 0;
};

// A non-finite loss in low precision: the step keeps the last good weights (fp32 steps regardless).
bool skips_update(const MixedPrecision& precision, double loss);

class UpdateAfterBackward : public UpdatePlacement {
 public:
  explicit UpdateAfterBackward(UpdateParts& parts) : parts_(parts) {}
  OptimizerStep kind() const override { return OptimizerStep::AfterBackward; }
  void begin_step(double) override {}
  bool runs_backward(const torch::Tensor&) override { return true; }
  // A step cannot be redone on one rank alone once the other ranks' collectives would not match the
  // redo's: under ZeRO-2/3 or tensor/pipeline parallelism, or after gradient all-reduces began.
  void check_redo(const std::exception& e, bool oom, int64_t step) const override;
  double finish_step(double& loss, double lr, StepMetrics& m) override;

 private:
  UpdateParts& parts_;
};

class OptimizerInBackward;

class UpdateInBackward : public UpdatePlacement {
 public:
  // Throws ConfigError unless the step is one micro-batch (`grad_accum_steps` = 1), unclipped, not
  // fp16, in one process (`world_size` = 1) and without ZeRO-1 sharding; installs the hooks.
  UpdateInBackward(UpdateParts& parts, int64_t grad_accum_steps, int world_size);
  ~UpdateInBackward() override;
  OptimizerStep kind() const override { return OptimizerStep::InBackward; }
  void begin_step(double lr) override;
  bool runs_backward(const torch::Tensor& loss) override;
  void check_redo(const std::exception& e, bool oom, int64_t step) const override;
  double finish_step(double& loss, double lr, StepMetrics& m) override;

 private:
  UpdateParts& parts_;
  std::unique_ptr<OptimizerInBackward> hooks_;
};

}  // namespace hwt
