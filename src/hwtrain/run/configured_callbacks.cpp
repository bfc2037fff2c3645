#include "hwtrain/run/configured_callbacks.h"

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/train/early_stopping.h"
#include "hwtrain/train/interrupt.h"
#include "hwtrain/train/lr_monitor.h"
#include "hwtrain/train/lr_plateau.h"
#include "hwtrain/train/profiler_callback.h"

namespace hwt {

void check_monitor(const RunConfig& config, const std::string& key, const std::string& metric, int world_size) {
  check_metric_name(metric, "config: " + key);
  if (world_size > 1 && is_rank_local_metric(metric)) {
    throw ConfigError("config: " + key + " = '" + metric + "' is measured by each of the " +
                      std::to_string(world_size) +
                      " processes for itself, so they would act on it apart (stop, cut the learning rate or keep a "
                      "best checkpoint at different steps); monitor a metric every rank shares, such as loss or "
                      "val_loss");
  }
  if (is_eval_metric(metric) && config.train.eval_interval <= 0) {
    throw ConfigError("config: " + key + " = '" + metric +
                      "' needs evaluations, but train.eval_interval = 0 turns them off; set train.eval_interval "
                      "(e.g. 250) or monitor a per-step metric such as loss");
  }
}

std::vector<std::shared_ptr<Callback>> make_configured_callbacks(const RunConfig& config, int rank, int world_size) {
  std::vector<std::shared_ptr<Callback>> out;
  out.push_back(std::make_shared<InterruptStopper>());
  if (config.early_stopping.enabled) {
    check_monitor(config, "early_stopping.monitor", config.early_stopping.monitor, world_size);
    out.push_back(std::make_shared<EarlyStopping>(config.early_stopping));
  }
  if (config.lr_plateau.enabled) {
    check_monitor(config, "lr_plateau.monitor", config.lr_plateau.monitor, world_size);
    if (config.lr_plateau.min_lr >= config.train.lr) {
      throw ConfigError("config: lr_plateau.min_lr = " + option_text(config.lr_plateau.min_lr) +
                        (config.is_set("lr_plateau.min_lr") ? "" : " (its default)") + " is not below train.lr = " +
                        option_text(config.train.lr) +
                        ", so the learning rate could never be reduced; set lr_plateau.min_lr below it (0 = no floor)");
    }
    out.push_back(std::make_shared<ReduceLROnPlateau>(config.lr_plateau));
  }
  if (config.lr_monitor.enabled) out.push_back(std::make_shared<LearningRateMonitor>(config.lr_monitor));
  if (!config.log.profile_steps.empty()) {
    ProfilerOptions options;
    options.steps = parse_profile_steps(config.log.profile_steps);
    options.rank = rank;
    out.push_back(std::make_shared<ProfilerCallback>(options));
  }
  if (!config.checkpoint.monitor.empty()) {
    const std::string& metric = config.checkpoint.monitor;
    check_monitor(config, "checkpoint.monitor", metric, world_size);
    // A per-step metric is compared when a checkpoint is saved: without scheduled saves, never.
    if (!is_eval_metric(metric) && config.checkpoint.interval <= 0 && config.checkpoint.every_minutes <= 0) {
      throw ConfigError("config: checkpoint.monitor = '" + metric + "' is compared when a checkpoint is saved, but "
                        "checkpoint.interval = 0 and checkpoint.every_minutes = 0 schedule none; set "
                        "checkpoint.interval (e.g. 500) or monitor an evaluation metric such as val_loss");
    }
  }
  return out;
}

}  // namespace hwt
