// CheckpointConfig: when and where checkpoints are written. Header-only plain struct.
#pragma once
#include <cstdint>
#include <string>

namespace hwt {

struct CheckpointConfig {
  int64_t interval = 500;  // steps between checkpoints; 0 = only at the end
  int64_t keep_last = 3;   // checkpoints kept; older ones are removed after a new one is complete
  bool save_final = true;  // write one when training ends
  std::string dir = "";    // "" = <run dir>/checkpoints

  template <class V>
  void visit(V& v) {
    v("interval", interval, "steps between checkpoints; 0 = only at the end");
    v("keep_last", keep_last, "number of checkpoints kept");
    v("save_final", save_final, "write a checkpoint when training ends");
    v("dir", dir, "checkpoint directory; empty = <run dir>/checkpoints");
  }
};

}  // namespace hwt
