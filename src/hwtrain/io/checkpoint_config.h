// CheckpointConfig: when and where checkpoints are written. Header-only plain struct.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/core/metric_goal.h"
#include "hwtrain/core/option_checks.h"

namespace hwt {

struct CheckpointConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  int64_t interval = 500;
  double every_minutes = 0;
  int64_t keep_last = 3;
  bool save_final = true;
  std::string dir = "";
  std::string monitor = "";
  MetricGoal mode = MetricGoal::kMin;

  void validate() const {
    check_at_least("checkpoint.interval", interval, 0);
    check_at_least("checkpoint.keep_last", keep_last, 1);
    check_non_negative("checkpoint.every_minutes", every_minutes, "0 = off");
  }

  template <class V>
  void visit(V& v) {
    v("interval", interval, "steps between checkpoints; 0 = only at the end");
    v("every_minutes", every_minutes, "also a checkpoint at least this often, in minutes (long steps make a "
      "step count a poor clock); 0 = off");
    v("keep_last", keep_last, "checkpoints kept; older ones are removed once a new one is complete");
    v("save_final", save_final, "write a checkpoint when training ends");
    v("dir", dir, "checkpoint directory; empty = <run dir>/checkpoints");
    v("monitor", monitor, "metric whose best checkpoint is kept as best_<metric>; empty = off");
    v("mode", mode, "which direction of monitor is better: min (lower) or max (higher)");
  }
};

}  // namespace hwt
