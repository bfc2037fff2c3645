// CheckpointConfig: when and where checkpoints are written. Header-only plain struct.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/core/option_checks.h"

namespace hwt {

struct CheckpointConfig {
  int64_t interval = 500;     // steps between checkpoints; 0 = only at the end
  double every_minutes = 0;   // also one at least this often; 0 = off (long steps make a step count a poor clock)
  int64_t keep_last = 3;      // checkpoints kept; older ones are removed after a new one is complete
  bool save_final = true;     // write one when training ends
  std::string dir = "";       // "" = <run dir>/checkpoints
  std::string monitor = "";   // a metric (e.g. val_loss): also keep the best one as best_<metric>; "" = off
  std::string mode = "min";   // min | max: which direction of `monitor` is better

  void validate() const {
    check_at_least("checkpoint.interval", interval, 0);
    check_at_least("checkpoint.keep_last", keep_last, 1);
  }

  template <class V>
  void visit(V& v) {
    v("interval", interval, "steps between checkpoints; 0 = only at the end");
    v("every_minutes", every_minutes, "minutes between checkpoints; 0 = off");
    v("keep_last", keep_last, "number of checkpoints kept");
    v("save_final", save_final, "write a checkpoint when training ends");
    v("dir", dir, "checkpoint directory; empty = <run dir>/checkpoints");
    v("monitor", monitor, "metric whose best checkpoint is kept as best_<metric>; empty = off");
    v("mode", mode, "min: lower monitor is better; max: higher", std::vector<std::string>{"min", "max"});
  }
};

}  // namespace hwt
