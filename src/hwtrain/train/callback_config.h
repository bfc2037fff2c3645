// Options of the built-in rule callbacks, one TOML table each: [early_stopping], [lr_plateau],
// [lr_monitor]. Header-only plain structs; every callback is off unless `enabled = true`.
// Metric names are checked when the callbacks are built (train/configured_callbacks.h), where the
// list of metrics is known; ranges are checked by validate().
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/core/metric_goal.h"

namespace hwt {

// Returns `options` after options.validate(): lets constructors validate in their initializer list.
template <class Options>
const Options& validated(const Options& options) {
  options.validate();
  return options;
}

// "Improved" means: below best - min_delta (mode min) or above best + min_delta (mode max).
// Patience counts checks without improvement: evaluations for an evaluation metric (val_loss),
// steps for a per-step metric (loss, grad_norm, ...).
struct EarlyStoppingConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  bool enabled = false;
  std::string monitor = "val_loss";
  MetricGoal mode = MetricGoal::kMin;
  int64_t patience = 3;
  double min_delta = 0.0;
  bool restore_best_weights = false;

  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "stop training when the monitored metric stops improving");
    v("monitor", monitor,
      "metric to watch, e.g. val_loss or loss (an unknown name is refused with the list of valid ones)");
    v("mode", mode, "min: lower is better; max: higher is better");
    v("patience", patience, "checks without improvement before stopping");
    v("min_delta", min_delta, "smallest change that counts as an improvement");
    v("restore_best_weights", restore_best_weights, "load the best weights when stopping (costs one copy of "
      "the weights; under zero2/zero3 of each rank's fp32 master shard)");
  }

  void validate() const {
    if (patience < 1) {
      throw ConfigError("config: early_stopping.patience = " + std::to_string(patience) + " must be at least 1");
    }
    if (!(min_delta >= 0)) throw ConfigError("config: early_stopping.min_delta must be >= 0");
  }
};

// Multiplies the learning rate by `factor` after `patience` checks without improvement, never
// below min_lr, then waits `cooldown` checks before counting again (as PyTorch's scheduler).
struct LrPlateauConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  bool enabled = false;
  std::string monitor = "val_loss";
  MetricGoal mode = MetricGoal::kMin;
  double factor = 0.5;  // halving: gentler than PyTorch's 0.1 for runs of a few thousand steps
  int64_t patience = 2;
  double min_delta = 0.0;
  double min_lr = 1e-5;
  int64_t cooldown = 0;

  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "reduce the learning rate when the monitored metric plateaus");
    v("monitor", monitor, "metric to watch, e.g. val_loss");
    v("mode", mode, "min: lower is better; max: higher is better");
    v("factor", factor, "multiplier applied to the learning rate, in (0, 1)");
    v("patience", patience, "checks without improvement before reducing");
    v("min_delta", min_delta, "smallest change that counts as an improvement");
    v("min_lr", min_lr, "floor of the effective learning rate (train.lr x the reductions)");
    v("cooldown", cooldown, "checks after a reduction during which no new reduction is counted");
  }

  void validate() const {
    if (!(factor > 0 && factor < 1)) {
      throw ConfigError("config: lr_plateau.factor = " + option_text(factor) + " must be in (0, 1), e.g. 0.5");
    }
    if (patience < 1)
      throw ConfigError("config: lr_plateau.patience = " + std::to_string(patience) + " must be at least 1");
    if (!(min_delta >= 0)) throw ConfigError("config: lr_plateau.min_delta must be >= 0");
    if (!(min_lr >= 0)) throw ConfigError("config: lr_plateau.min_lr must be >= 0");
    if (cooldown < 0) throw ConfigError("config: lr_plateau.cooldown = " + std::to_string(cooldown) + " must be >= 0");
  }
};

// Keeps the learning rate every `interval` steps and every change of the LR scale that a callback
// (such as lr_plateau) makes, and logs the changes.
struct LrMonitorConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  bool enabled = false;
  int64_t interval = 0;

  template <class V>
  void visit(V& v) {
    v("enabled", enabled, "record and log learning-rate changes");
    v("interval", interval, "steps between learning-rate samples; 0 = train.log_interval");
  }

  void validate() const {
    if (interval < 0) throw ConfigError("config: lr_monitor.interval = " + std::to_string(interval) + " must be >= 0");
  }
};

}  // namespace hwt
