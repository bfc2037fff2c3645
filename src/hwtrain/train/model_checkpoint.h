// ModelCheckpoint: saves checkpoints every N steps and/or every M minutes, at the end of
// training, and optionally when a monitored metric improves (best_<metric> kept beside the
// rotating ones). The store keeps the last checkpoint.keep_last.
#pragma once
#include <optional>
#include <string>

#include "hwtrain/train/callback.h"

namespace hwt {

struct ModelCheckpointOptions {
  int64_t every_steps = 0;     // 0 = off
  double every_minutes = 0;    // 0 = off
  bool save_final = true;
  std::string monitor;         // "" = no best tracking; else a metric name such as val_loss
  std::string mode = "min";    // min | max
};

class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(ModelCheckpointOptions options);
  std::string name() const override { return "model_checkpoint"; }
  void on_train_begin(TrainerControl& t) override;
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;
  void on_evaluation_end(TrainerControl& t, const EvalMetrics& m) override;
  void on_train_end(TrainerControl& t) override;
  std::optional<double> best() const { return best_; }

 private:
  void save(TrainerControl& t);
  ModelCheckpointOptions options_;
  double last_save_time_ = 0;
  int64_t last_saved_step_ = -1;
  std::optional<double> best_;
};

// Stops training once the elapsed time reaches `seconds` (0 = no limit).
class TimeBudgetStopper : public Callback {
 public:
  explicit TimeBudgetStopper(double seconds) : seconds_(seconds) {}
  std::string name() const override { return "time_budget"; }
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;

 private:
  double seconds_;
};

}  // namespace hwt
