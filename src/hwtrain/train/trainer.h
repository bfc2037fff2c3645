// Trainer: the optimization loop. It executes a Plan (it never decides precision, batch size or
// kernels itself): for each step it draws the global batch, runs micro-batches under autocast,
// synchronizes gradients (data parallel), unscales and clips, steps AdamW on the schedule, and
// hands metrics to callbacks, which do the logging, evaluation sinks, checkpointing and stopping.
// An out-of-memory error in a step halves the micro-batch, doubles accumulation and redoes the
// step on the same data, so no sample is lost or used twice. Where AdamW updates is the plan's
// UpdatePlacement (train/update_placement.h): after backward, or inside it (where an OOM stops the run).
// It trains any TrainableModel (model/trainable_model.h: the built-in GPT through GptModel, or a
// user's module) on any TrainingData (train/training_data.h: token windows or a user's examples).
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "hwtrain/data/batch_loader.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/tokenizer.h"
#include "hwtrain/data/window_sampler.h"
#include "hwtrain/dist/gradient_sync.h"
#include "hwtrain/model/gpt.h"
#include "hwtrain/model/trainable_model.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/train/adamw.h"
#include "hwtrain/train/batch_size_probe.h"
#include "hwtrain/train/callback.h"
#include "hwtrain/train/cuda_graph_step.h"
#include "hwtrain/train/device_batches.h"
#include "hwtrain/train/grad_scaler.h"
#include "hwtrain/train/mixed_precision.h"
#include "hwtrain/train/trainer_options.h"
#include "hwtrain/train/training_checkpoint.h"
#include "hwtrain/train/training_data.h"
#include "hwtrain/train/update_placement.h"

namespace hwt {

struct TrainerStateFile;

struct TrainResult {
  int64_t steps = 0;
  double final_loss = 0;         // last training loss
  double final_val_loss = 0;     // last validation loss (NaN if none)
  double elapsed_seconds = 0;
  int64_t tokens_seen = 0;
  int64_t oom_recoveries = 0;
  std::string stop_reason;
  std::optional<std::filesystem::path> last_checkpoint;
};

class Trainer : public TrainerControl {
 public:
  Trainer(TrainerOptions options, Plan plan, std::shared_ptr<TrainableModel> model,
          std::shared_ptr<const TrainingData> data, std::filesystem::path run_dir, int rank = 0, int world_size = 1);
  // The built-in path: a GPT on windows of model.block_size tokens of a sharded dataset (the
  // validation windows seeded train.seed + 1).
  Trainer(TrainerOptions options, Plan plan, GPT model, std::shared_ptr<const ShardedDataset> data,
          std::filesystem::path run_dir, int rank = 0, int world_size = 1);

  void add_callback(std::shared_ptr<Callback> callback) { callbacks_.add(std::move(callback)); }
  const CallbackList& callbacks() const { return callbacks_; }
  // A model-parallel model's sync also sums the gradients of weights several ranks hold (shared_gradient_sync.h).
  void set_gradient_sync(std::shared_ptr<GradientSync> sync);
  // Data-parallel runs report the loss averaged over ranks (every rank must call it each step).
  void set_loss_reducer(std::function<double(double)> mean) { parts_.loss_mean = std::move(mean); }
  // Must be set after resume_from (which loads the whole optimizer state), before fit(). With an
  // optimizer in `sharding` (ZeRO-2/3), it replaces the trainer's.
  void set_optimizer_sharding(OptimizerSharding sharding);
  // Under a ZeRO-2/3 plan resume_from keeps the checkpoint's optimizer state aside instead of
  // loading it into the whole optimizer: shard_training cuts it to the shards (one whole copy at
  // most), or, from a sharded checkpoint, reads each rank's own segments of the weights and the
  // state from the shard files (the model keeps its initial weights until then). Taken once;
  // fit() loads whatever was not taken into the whole model and optimizer.
  ResumedState take_resumed_state() { return std::exchange(resumed_, {}); }
  // Distributed runs: `any` ORs a flag across ranks (collective). The trainer calls it once per
  // step so that a stop requested on one rank (Ctrl-C, a callback) ends every rank at that step.
  void set_stop_agreement(std::function<bool(bool)> any) { stop_any_ = std::move(any); }
  // Distributed runs: called on every rank after each save_checkpoint(); rank 0 says its write is
  // sealed, the others wait for that (however long it takes), not in their next collective, whose
  // dist.timeout a large checkpoint's write and verification on rank 0 alone would outlast.
  void set_save_agreement(std::function<void()> saved) { saved_everywhere_ = std::move(saved); }
  // Restores weights, optimizer, scaler, RNG, data loader position and counters from a checkpoint
  // (read_training_checkpoint: verified against its COMPLETE marker, its state range-checked).
  void resume_from(const std::filesystem::path& checkpoint);
  // The same from a checkpoint already read from `where` (the CLI reads it before any other work).
  void resume_from(const TrainingCheckpoint& checkpoint, const std::filesystem::path& where);

  // optimization.auto_batch_size: measures probe steps and sets the micro-batch and accumulation
  // (their product, the rows per rank and step, stays). Call before fit() and before gradient
  // sync is attached; weights, optimizer state and RNG are as before. See batch_size_probe.h.
  BatchProbeResult probe_micro_batch();

  TrainResult fit();
  double evaluate();  // mean validation loss over the fixed evaluation batches

  TrainableModel& model() { return *model_; }
  AdamW& optimizer() { return *optimizer_; }
  const GradScaler& scaler() const { return precision_->scaler(); }

  // Mixed precision at run time (between steps), e.g. fp32 for an evaluation: enable() restores
  // the plan's dtype (or switches to `p`), disable() trains in fp32; see mixed_precision.h.
  void enable_mixed_precision() { precision_->enable(); }
  void enable_mixed_precision(Precision p);  // ConfigError: fp16 with the optimizer in backward
  void disable_mixed_precision() { precision_->disable(); }
  MixedPrecisionStatus get_mixed_precision_status() const { return precision_->status(); }
  // The optimizer in backward at run time (between steps); enabling checks what the planner
  // checks (one micro-batch per step, train.grad_clip = 0, no fp16, one process) and throws
  // ConfigError otherwise. The weights and optimizer state carry over either way.
  void set_optimizer_in_backward(bool enabled);
  bool optimizer_in_backward() const { return placement_->kind() == OptimizerStep::InBackward; }
  int64_t micro_batch_size() const { return micro_batch_size_; }
  int64_t grad_accum_steps() const { return grad_accum_steps_; }
  const std::vector<double>& loss_history() const { return loss_history_; }
  // Where the training stream stands: the loader position of the next step's batch.
  LoaderState loader_state() const { return batches_->state(); }
  // The dataset's tokenizer (what checkpoints carry); null for hand-made test data without one.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  // The captured step where the plan asks for CUDA graphs (null otherwise): whether it was captured,
  // how many steps it replayed, and why it stopped.
  const CudaGraphStep* cuda_graph() const { return graph_.get(); }

  // TrainerControl
  int64_t step() const override { return step_; }
  double elapsed_seconds() const override;
  const TrainerOptions& options() const override { return options_; }
  const Plan& plan() const override { return plan_; }
  const std::filesystem::path& run_dir() const override { return run_dir_; }
  void request_stop(const std::string& reason) override;
  bool stop_requested() const override { return stop_requested_; }
  double lr_scale() const override { return lr_scale_; }
  void set_lr_scale(double scale) override { lr_scale_ = scale; }
  std::filesystem::path save_checkpoint() override;
  NamedTensors snapshot_weights() const override;
  void restore_weights(const NamedTensors& weights) override;
  bool evaluates_at(int64_t step) const override {
    const int64_t every = options_.train.eval_interval;
    return every > 0 && step % every == 0 && data_->has_validation();
  }
  void load_untaken_resumed_state();
  void check_weights_match_model(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) const;

 private:
  std::filesystem::path checkpoint_dir() const;  // checkpoint.dir, or <run>/checkpoints
  void set_aside_later_checkpoints();  // at the first save after a resume from this run's own directory
  friend class TrainerTestSeam;  // fault injection for tests (tests/train/trainer_test_seam.h)
  void restore_batch_split(const TrainerStateFile& s, const std::filesystem::path& checkpoint);
  StepMetrics train_step();
  // Runs forward/backward over the global batch; returns the mean loss. Throws on OOM.
  double run_micro_steps(const torch::Tensor& x_NT, const torch::Tensor& y_NT, StepMetrics& m);
  // The same for a pipeline stage: the step's micro-batches by the 1F1B schedule (pipeline_step.h).
  double run_pipeline_micro_steps(PipelineStage& stage, const torch::Tensor& x_NT, const torch::Tensor& y_NT,
                                  StepMetrics& m);
  // Runs the step's micro-steps on the same data until they succeed, halving the micro-batch after
  // an OOM and falling back to fp32 for a missing kernel, as far as the placement allows.
  double run_step_with_retries(const torch::Tensor& x_NT, const torch::Tensor& y_NT, double lr, StepMetrics& m);
  void fill_step_metrics(StepMetrics& m, int64_t tokens, int64_t rows) const;
  // `cache_casts`: autocast's weight-cast cache (the plan's setting; off while capturing a graph).
  torch::Tensor forward_loss(const torch::Tensor& x_BT, const torch::Tensor& y_BT);
  torch::Tensor forward_loss(const torch::Tensor& x_BT, const torch::Tensor& y_BT, bool cache_casts);
  // trainer_graphed.cpp: the step from the CUDA graph where the plan captures it, else eagerly
  // (with OOM retries); returns the loss and sets `grad_norm`.
  double run_step(const DeviceBatch& batch, double lr, StepMetrics& m, double& grad_norm);
  void make_graph_step();
  std::string graph_obstacle() const;  // why this step cannot be captured ("" if it can)
  torch::Tensor graphed_micro_steps(const torch::Tensor& x_NT, const torch::Tensor& y_NT);
  std::vector<torch::Tensor> parameters() const;
  TrainingCheckpoint checkpoint_contents(NamedTensors optimizer_state) const;
  std::filesystem::path store_checkpoint(const TrainingCheckpoint& ckpt,
                                         const std::function<void(const std::filesystem::path&)>& also);
  std::filesystem::path save_whole_checkpoint();
  std::filesystem::path save_sharded_checkpoint();
  NamedTensors master_weights() const;  // ZeRO-2/3 of a split model (collective)
  void restore_master_shards(const NamedTensors& weights);  // restore_weights under ZeRO-2/3
  void use_model_parallel_norm();

  TrainerOptions options_;
  Plan plan_;
  std::shared_ptr<TrainableModel> model_;
  std::shared_ptr<const TrainingData> data_;
  std::filesystem::path run_dir_;
  int rank_, world_size_;
  torch::Device device_;
  std::shared_ptr<AdamW> optimizer_;  // replaced by a sharded one under ZeRO-2/3
  std::unique_ptr<MixedPrecision> precision_;
  UpdateParts parts_;                           // what the placement acts on: optimizer, precision, sync
  std::unique_ptr<UpdatePlacement> placement_;  // where AdamW updates: after backward or inside it
  std::function<torch::Tensor(const torch::Tensor&)> loss_hook_;
  std::unique_ptr<BatchLoader> train_loader_;  // this rank's rows of each step, prefetched
  std::unique_ptr<DeviceBatches> batches_;     // the same rows on the device, copied a step ahead
  std::unique_ptr<CudaGraphStep> graph_;       // the captured step (optimization.cuda_graphs)
  std::unique_ptr<Tokenizer> tokenizer_;  // copied into every checkpoint; null for hand-made test data
  std::function<bool(bool)> stop_any_;
  std::function<void()> saved_everywhere_;
  CallbackList callbacks_;

  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  int64_t micro_batch_size_, grad_accum_steps_;
  int64_t oom_recoveries_ = 0;
  int64_t inject_oom_step_ = -1;
  double lr_scale_ = 1.0;
  double elapsed_before_ = 0;  // seconds trained before a resume
  std::chrono::steady_clock::time_point start_;
  bool stop_requested_ = false;
  std::string stop_reason_;
  double flops_per_row_ = 0;
  std::vector<double> loss_history_;
  std::optional<std::filesystem::path> last_checkpoint_;
  int64_t sharded_saves_ = 0;  // names each sharded checkpoint's staging directory exchange
  ResumedState resumed_;  // see take_resumed_state
  std::map<std::string, CallbackState> resumed_callbacks_;  // the checkpoint's callback states
  std::optional<int64_t> branched_at_;  // the step resumed from, of a checkpoint in this run's directory
  int64_t weight_restores_ = 0;  // restore_weights calls: a restore after an evaluation calls for another
};

}  // namespace hwt
