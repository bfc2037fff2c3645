// SweepRunner: runs a study to its budget. It keeps up to trials_at_once trial processes running:
// claims a trial from the study store (a new one sampled with trial_seed(seed, number), or the retry
// of an interrupted one), gives it a clean directory <out_dir>/trials/<number> and a slot, starts
// the command the caller builds, and polls every trial (trial_runner.h) until the budget (trials,
// time) is spent and every trial has ended. A failed trial (crash, out of memory, divergence) never
// stops the sweep. SIGINT or SIGTERM to the sweep stops it: no new trial starts, the running ones
// are stopped and marked INTERRUPTED, and run() returns with interrupted = true. Running it again on
// the same study resumes it: completed trials are kept, interrupted ones are retried once.
// It does not parse the sweep file, pick the sampler, decide the parallelism or print tables: the
// caller does (sweep_config.h, sweep_components.h, trial_parallelism.h, sweep_outputs.h).
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/sweep/pruner.h"
#include "hwtrain/sweep/sampler.h"
#include "hwtrain/sweep/study_store.h"
#include "hwtrain/sweep/sweep_config.h"
#include "hwtrain/sweep/trial_parallelism.h"
#include "hwtrain/sweep/trial_process.h"
#include "hwtrain/sweep/trial_runner.h"

namespace hwt::sweep {

// Builds the command of one trial: what to run, writing its metrics.jsonl into `trial_dir` (which
// exists and is empty), with slot.threads intra-op threads on slot.gpu (-1 = CPU; for a GPU the
// caller sets CUDA_VISIBLE_DEVICES in the returned env). May throw ConfigError: the sweep stops.
using TrialCommand =
    std::function<TrialLaunch(const Trial& trial, const std::filesystem::path& trial_dir, const Slot& slot)>;

struct SweepRunnerOptions {
  // Seconds between polls of the running trials: metrics lines are read, the pruner asked and
  // exits noticed this often. 0.5: prompt enough for steps of a second, cheap on a busy machine.
  double poll_interval_s = 0.5;
  double kill_grace_s = 10.0;          // see TrialRunnerOptions
  double heartbeat_interval_s = 10.0;  // see TrialRunnerOptions
  // Catch SIGINT and SIGTERM while run() runs (the previous handlers come back after). Off only
  // where the caller stops the sweep by other means (request_stop()).
  bool handle_signals = true;
  // Receives one line per event (trial started, ended, budget reached); empty = silent.
  std::function<void(const std::string&)> log;
};

struct SweepResult {
  std::vector<Trial> trials;          // every trial of the study after this run, by number
  std::optional<Trial> best;          // the complete trial with the lowest minimized value
  std::map<std::int64_t, double> seconds;  // wall time of the trials this run ran, by number
  int num_started = 0;                // trials (new or retried) this run started
  bool interrupted = false;           // stopped by SIGINT/SIGTERM or request_stop()
  std::string stop_reason;            // one line: why run() returned
};

class SweepRunner {
 public:
  // `store`, `sampler` and `pruner` (may be null) must outlive the runner. A grid sampler caps the
  // trial budget at the grid's size. parallelism.gpu_of_slot gives the slots (at least one).
  SweepRunner(SweepConfig config, StudyStore& store, Sampler& sampler, const Pruner* pruner,
              TrialParallelism parallelism, TrialCommand command, SweepRunnerOptions options = {});

  SweepResult run();

  // Asks a running run() to stop as SIGINT would (async-signal-safe: sets a flag).
  static void request_stop();

 private:
  void start_trial(Trial trial, const Slot& slot, double now_s);
  bool fill_slots(double now_s, double deadline_s);
  void poll_running(double now_s);
  void stop_all(const std::string& reason, double now_s);
  void say(const std::string& line) const;

  SweepConfig config_;
  StudyStore& store_;
  Sampler& sampler_;
  const Pruner* pruner_;
  TrialParallelism parallelism_;
  TrialCommand command_;
  SweepRunnerOptions options_;
  int max_trials_ = 1;
  std::vector<std::optional<TrialRunner>> slots_;  // one per slot, empty when free
  SweepResult result_;
  bool no_more_trials_ = false;
};

// The complete trial with the lowest value (ties: the lower number), if any.
std::optional<Trial> best_trial(const std::vector<Trial>& trials);

}  // namespace hwt::sweep
