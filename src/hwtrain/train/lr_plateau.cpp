#include "hwtrain/train/lr_plateau.h"

#include <algorithm>

#include "hwtrain/train/trainer_options.h"
#include "hwtrain/obs/log.h"

namespace hwt {

ReduceLROnPlateau::ReduceLROnPlateau(const LrPlateauConfig& options)
    : options_(validated(options)),
      watch_(options.monitor, options.mode, options.min_delta,
             "lr_plateau.monitor") {}

void ReduceLROnPlateau::on_train_begin(TrainerControl& t) {
  const double base_lr = t.options().train.lr;
  min_scale_ = base_lr > 0 ? options_.min_lr / base_lr : 0.0;
  watch_.reset();
  cooldown_left_ = 0;
  floor_reported_ = false;
  reductions_.clear();
}

CallbackState ReduceLROnPlateau::state() const {
  CallbackState s;
  watch_.save_state(s);
  s["cooldown_left"] = static_cast<double>(cooldown_left_);
  return s;
}

void ReduceLROnPlateau::load_state(const CallbackState& s) {
  watch_.load_state(s);
  const auto it = s.find("cooldown_left");
  if (it != s.end() && it->second >= 0 && it->second <= static_cast<double>(options_.cooldown)) {
    cooldown_left_ = static_cast<int64_t>(it->second);
  }
}

void ReduceLROnPlateau::on_step_end(TrainerControl& t, const StepMetrics& m) {
  if (auto v = watch_.value_in(m)) check(t, *v, m.step);
}

void ReduceLROnPlateau::on_evaluation_end(TrainerControl& t, const EvalMetrics& m) {
  if (auto v = watch_.value_in(m)) check(t, *v, m.step);
}

void ReduceLROnPlateau::check(TrainerControl& t, double value, int64_t step) {
  const bool improved = watch_.update(value, step);
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    watch_.reset_wait();  // checks during the cooldown do not count towards the next reduction
    return;
  }
  if (improved || watch_.checks_without_improvement() < options_.patience) return;
  watch_.reset_wait();
  const double old_scale = t.lr_scale();
  const double new_scale = std::max(old_scale * options_.factor, min_scale_);
  // A relative epsilon, as PyTorch's `eps`: changes too small to matter are not made.
  if (old_scale - new_scale <= 1e-8 * old_scale) {
    if (!floor_reported_) {
      log_info("lr_plateau: {} stopped improving at step {}, but the learning rate is already at min_lr = {:g}",
               watch_.monitor(), step, options_.min_lr);
      floor_reported_ = true;
    }
    return;
  }
  t.set_lr_scale(new_scale);
  reductions_.push_back({step, old_scale, new_scale});
  cooldown_left_ = options_.cooldown;
  log_info("lr_plateau: {} did not improve for {} checks (best {:.6g} at step {}); learning rate x{:g} -> scale {:.4g}",
           watch_.monitor(), options_.patience, watch_.best().value_or(kUnknown), watch_.best_step(), options_.factor,
           new_scale);
}

}  // namespace hwt
