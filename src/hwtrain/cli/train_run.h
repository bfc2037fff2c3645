// One training run as `hwtrain train` runs it, for the commands built on it (profile, lr-find):
// config, run directory, data, plan, trainer, sinks, data parallelism, checkpoints, sample.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "hwtrain/cli/commands.h"
#include "hwtrain/train/callback.h"

namespace hwt::cli {

// The arguments of `hwtrain train`; `profile` and `lr-find` run it with their own.
struct TrainArgs {
  ConfigOptions config;
  std::string out;
  std::string resume;
  std::string init_from;      // a Hugging Face model directory whose shape and weights start the run
  bool overwrite = false;     // --out DIR may replace the run DIR holds
  std::string profile_steps;  // shorthand for --set log.profile_steps=a:b
  // Added after the configured ones (lr-find's range test); not a command-line option.
  std::vector<std::shared_ptr<Callback>> extra_callbacks;
};

// Runs it; returns the process exit code (errors are thrown).
int run_train(const TrainArgs& a);

}  // namespace hwt::cli
