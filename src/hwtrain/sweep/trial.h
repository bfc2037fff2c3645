// The vocabulary of a hyperparameter search, shared by the search space, the samplers, the
// pruners and the study store: a trial's parameters, its state and what it reported.
// Objectives are minimized everywhere below the sweep command: a "max" objective is stored negated,
// so samplers and pruners never need to know the direction.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace hwt::sweep {

// One parameter's value: a real (uniform, log-uniform), an integer (int) or the chosen literal of a
// choice, kept as written in the space (e.g. "bf16", "true", "0.1") so it can become a --set value.
using ParamValue = std::variant<double, std::int64_t, std::string>;
// Config key ("train.learning_rate") -> value. Ordered, so a trial's parameters print and hash stably.
using Params = std::map<std::string, ParamValue>;

enum class TrialState {
  kRunning,      // claimed by a sweep process that is (or was) running it
  kComplete,     // finished; `value` is its objective
  kPruned,       // stopped early by the pruner; `value` is its last reported value
  kFailed,       // crashed, ran out of memory, diverged or reported no objective; see `reason`
  kInterrupted,  // its sweep process died mid-trial; retried once by the next sweep process
};

struct Trial {
  std::int64_t number = -1;  // 0, 1, 2, ... in the order trials were created in the study
  TrialState state = TrialState::kRunning;
  Params params;
  std::optional<double> value;                  // minimized objective (see the file comment)
  std::map<std::int64_t, double> intermediate;  // step -> reported (minimized) value, for pruners
  std::string reason;                           // why it failed, was pruned or was interrupted
  int attempts = 1;  // 2 after an interrupted trial was retried; 0 while one that could not start waits
  // Its wall time (unix seconds) as the study store recorded it: the last attempt's start, and its
  // end (nullopt while running).
  double started_unix = 0;
  std::optional<double> finished_unix;
};

}  // namespace hwt::sweep
