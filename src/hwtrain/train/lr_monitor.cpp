#include "hwtrain/train/lr_monitor.h"

#include <algorithm>
#include <cmath>

#include "hwtrain/train/trainer_options.h"
#include "hwtrain/obs/log.h"

namespace hwt {

LearningRateMonitor::LearningRateMonitor(const LrMonitorConfig& options) : options_(validated(options)) {}

void LearningRateMonitor::on_train_begin(TrainerControl& t) {
  interval_ = options_.interval > 0 ? options_.interval : std::max<int64_t>(1, t.options().train.log_interval);
  base_lr_ = t.options().train.lr;
  last_scale_ = t.lr_scale();  // a resumed run starts from its checkpoint's scale: not a change
  samples_.clear();
  changes_.clear();
}

void LearningRateMonitor::on_step_end(TrainerControl& t, const StepMetrics& m) {
  if ((m.step % interval_ == 0 || samples_.empty()) && std::isfinite(m.lr)) {
    samples_.push_back({m.step, m.lr, t.lr_scale()});
    log_info("lr_monitor: step {} lr {:.4g} (scale {:.4g})", m.step, m.lr, t.lr_scale());  // what it is enabled for
  }
  check_scale(t, m.step);
}

void LearningRateMonitor::on_evaluation_end(TrainerControl& t, const EvalMetrics& m) { check_scale(t, m.step); }

void LearningRateMonitor::check_scale(TrainerControl& t, int64_t step) {
  const double scale = t.lr_scale();
  if (scale == last_scale_) return;
  changes_.push_back({step, last_scale_, scale, base_lr_ * scale});
  log_info("lr_monitor: learning rate scale {:.4g} -> {:.4g} after step {} (peak lr now {:.4g})", last_scale_, scale,
           step, base_lr_ * scale);
  last_scale_ = scale;
}

void LearningRateMonitor::on_train_end(TrainerControl& t) {
  check_scale(t, t.step());
  if (!changes_.empty()) {
    log_info("lr_monitor: {} learning-rate change(s); final scale {:.4g}", changes_.size(), last_scale_);
  }
}

}  // namespace hwt
