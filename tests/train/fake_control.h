// FakeTrainerControl: a TrainerControl without a trainer, for driving callbacks with scripted
// metric sequences. "Weights" are one tensor the test sets; checkpoints are real directories
// written through CheckpointStore (one small file each).
#pragma once
#include <torch/torch.h>

#include <cmath>

#include "hwtrain/core/files.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/train/callback.h"
#include "hwtrain/train/trainer_options.h"

namespace hwt::testing {

class FakeTrainerControl : public TrainerControl {
 public:
  explicit FakeTrainerControl(std::filesystem::path run_dir = {}) : run_dir_(std::move(run_dir)) {}

  TrainerOptions run_options;
  Plan run_plan;
  int64_t current_step = 0;
  double elapsed = 0;
  std::string stop_reason;
  int num_requests = 0;
  double scale = 1.0;
  torch::Tensor weight = torch::zeros({2});
  mutable int num_snapshots = 0;
  int num_restores = 0, num_saves = 0;
  bool evaluates = false;  // what evaluates_at answers for every step

  int64_t step() const override { return current_step; }
  double elapsed_seconds() const override { return elapsed; }
  const TrainerOptions& options() const override { return run_options; }
  const Plan& plan() const override { return run_plan; }
  const std::filesystem::path& run_dir() const override { return run_dir_; }
  void request_stop(const std::string& reason) override {
    if (num_requests++ == 0) stop_reason = reason;
  }
  bool stop_requested() const override { return num_requests > 0; }
  double lr_scale() const override { return scale; }
  void set_lr_scale(double s) override { scale = s; }
  std::filesystem::path save_checkpoint() override {
    ++num_saves;
    CheckpointStore store(run_dir_ / "checkpoints", run_options.checkpoint.keep_last);
    return store.save(current_step, [&](const std::filesystem::path& dir) {
      write_file_atomic(dir / "weight.txt", std::to_string(weight[0].item<double>()));
    });
  }
  bool evaluates_at(int64_t) const override { return evaluates; }
  NamedTensors snapshot_weights() const override {
    ++num_snapshots;
    return {{"w", weight.clone()}};
  }
  void restore_weights(const NamedTensors& w) override {
    ++num_restores;
    weight.copy_(w.at(0).second);
  }

 private:
  std::filesystem::path run_dir_;
};

inline StepMetrics step_record(int64_t step, double loss) {
  StepMetrics m;
  m.step = step;
  m.loss = loss;
  return m;
}

inline EvalMetrics eval_record(int64_t step, double val_loss) {
  EvalMetrics e;
  e.step = step;
  e.val_loss = val_loss;
  e.val_perplexity = std::exp(val_loss);
  return e;
}

}  // namespace hwt::testing
