// ReduceLROnPlateau: multiplies the trainer's LR scale by `factor` once a monitored metric has not
// improved for `patience` checks, then ignores `cooldown` checks. The scale multiplies whatever
// the schedule gives (warmup, cosine), so the schedule's shape is kept; min_lr bounds the peak:
// the scale never goes below min_lr / train.lr.
#pragma once
#include <vector>

#include "hwtrain/train/callback.h"
#include "hwtrain/train/callback_config.h"
#include "hwtrain/train/metric_watch.h"

namespace hwt {

struct LrReduction {
  int64_t step = 0;
  double old_scale = 1, new_scale = 1;
};

class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(const LrPlateauConfig& options);
  std::string name() const override { return "lr_plateau"; }
  void on_train_begin(TrainerControl& t) override;
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;
  void on_evaluation_end(TrainerControl& t, const EvalMetrics& m) override;
  // The watch's best and patience, and the cooldown left (the LR scale itself is the trainer's).
  CallbackState state() const override;
  void load_state(const CallbackState& s) override;

  const std::vector<LrReduction>& reductions() const { return reductions_; }
  const MetricWatch& watch() const { return watch_; }

 private:
  void check(TrainerControl& t, double value, int64_t step);

  LrPlateauConfig options_;
  MetricWatch watch_;
  double min_scale_ = 0;
  int64_t cooldown_left_ = 0;
  bool floor_reported_ = false;
  std::vector<LrReduction> reductions_;
};

}  // namespace hwt
