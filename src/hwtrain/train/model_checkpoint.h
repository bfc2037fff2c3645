// ModelCheckpoint: saves checkpoints every N steps and/or every M minutes, at the end of
// training, and, with a monitored metric, keeps the best one as <checkpoint dir>/best_<metric>
// beside the rotating step_* ones (hard links where the filesystem allows, so it costs no space
// while the step checkpoint still exists; the store's keep_last never removes it).
// An evaluation metric (val_loss) saves a checkpoint whenever it improves; a per-step metric
// (loss) is compared at each scheduled save, and the best of those is kept.
// Also TimeBudgetStopper, which stops training after a number of seconds.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "hwtrain/io/checkpoint_config.h"
#include "hwtrain/train/callback.h"
#include "hwtrain/train/metric_watch.h"

namespace hwt {

struct ModelCheckpointOptions {
  int64_t every_steps = 0;   // 0 = off
  double every_minutes = 0;  // 0 = off
  bool save_final = true;
  std::string monitor;       // "" = no best tracking; else a metric name such as val_loss
  MetricGoal mode = MetricGoal::kMin;
};

// The options of the [checkpoint] table.
ModelCheckpointOptions checkpoint_options(const CheckpointConfig& config);

class ModelCheckpoint : public Callback {
 public:
  // ConfigError for an unknown monitor, a bad mode, or negative intervals.
  // `agree` (data-parallel runs): ORs the time-based verdict across ranks, since a checkpoint of
  // sharded optimizer state is a collective that every rank must enter at the same step.
  explicit ModelCheckpoint(ModelCheckpointOptions options, std::function<bool(bool)> agree = {});
  std::string name() const override { return "model_checkpoint"; }
  void on_train_begin(TrainerControl& t) override;
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;
  void on_evaluation_end(TrainerControl& t, const EvalMetrics& m) override;
  void on_train_end(TrainerControl& t) override;
  // The monitored best so far: a resumed run keeps a best_<metric> that beats what it evaluates.
  CallbackState state() const override;
  void load_state(const CallbackState& s) override;
  std::optional<double> best() const { return watch_ ? watch_->best() : std::nullopt; }
  // The best checkpoint's directory (empty until one is kept, and on ranks other than 0).
  const std::filesystem::path& best_path() const { return best_path_; }

 private:
  std::filesystem::path save(TrainerControl& t);
  void keep_as_best(const std::filesystem::path& checkpoint);
  void restore_best_copy(const std::filesystem::path& saved);
  void save_now(TrainerControl& t, bool keep_best);  // unless the last loss was not finite

  ModelCheckpointOptions options_;
  std::function<bool(bool)> agree_;
  std::optional<MetricWatch> watch_;
  double last_save_time_ = 0;
  int64_t last_saved_step_ = -1;
  // A save due at a step that evaluates waits for the evaluation (whose results its state holds).
  struct Pending {
    bool save = false, improved = false;
  } pending_;
  bool last_loss_finite_ = true;  // the last step's, or its update skipped; a step without is not saved
  int64_t skipped_so_far_ = 0;     // the loss scaler's skipped steps at the last step
  std::filesystem::path last_saved_path_;
  std::filesystem::path best_path_;
  bool best_copy_checked_ = false;  // by the first save (after a branch set the later history aside)
};

// Copies (hard-links) checkpoint directory `checkpoint` to `<its parent>/<name>`, replacing an
// earlier one only once the new copy is complete. Returns the new directory.
std::filesystem::path link_checkpoint_as(const std::filesystem::path& checkpoint, const std::string& name);

// Stops training once the elapsed time reaches `seconds` (0 = no limit).
class TimeBudgetStopper : public Callback {
 public:
  // `agree` (data-parallel runs) turns each rank's verdict into one all ranks share, so that
  // they stop at the same step rather than leave the others waiting in a collective.
  explicit TimeBudgetStopper(double seconds, std::function<bool(bool)> agree = {})
      : seconds_(seconds), agree_(std::move(agree)) {}
  std::string name() const override { return "time_budget"; }
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;

 private:
  double seconds_;
  std::function<bool(bool)> agree_;
};

}  // namespace hwt
