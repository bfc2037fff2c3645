// LearningRateMonitor: keeps the learning rate every `interval` steps and every change of the LR
// scale made by a callback (ReduceLROnPlateau, or a user's), logging each change. The schedule's
// own smooth decay is sampled, not reported as changes.
#pragma once
#include <vector>

#include "hwtrain/train/callback.h"
#include "hwtrain/train/callback_config.h"

namespace hwt {

struct LrSample {
  int64_t step = 0;
  double lr = 0;     // the learning rate the optimizer used at this step
  double scale = 1;  // the callbacks' multiplier in it
};

struct LrChange {
  int64_t step = 0;  // the change applies from the step after this one
  double old_scale = 1, new_scale = 1;
  double peak_lr = 0;  // train.lr x new_scale
};

class LearningRateMonitor : public Callback {
 public:
  explicit LearningRateMonitor(const LrMonitorConfig& options);
  std::string name() const override { return "lr_monitor"; }
  void on_train_begin(TrainerControl& t) override;
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;
  void on_evaluation_end(TrainerControl& t, const EvalMetrics& m) override;
  void on_train_end(TrainerControl& t) override;

  const std::vector<LrSample>& samples() const { return samples_; }
  const std::vector<LrChange>& changes() const { return changes_; }

 private:
  void check_scale(TrainerControl& t, int64_t step);

  LrMonitorConfig options_;
  int64_t interval_ = 1;
  double base_lr_ = 0;
  double last_scale_ = 1;
  std::vector<LrSample> samples_;
  std::vector<LrChange> changes_;
};

}  // namespace hwt
