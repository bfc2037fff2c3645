// TrialRunner: one claimed trial from the start of its process to its end state in the study:
// each poll reads the trial's new metrics.jsonl lines, reports the objective (minimized: negated for
// direction = max), asks the pruner at each new step, heartbeats, and once the process has exited
// finishes the trial: COMPLETE with its objective, FAILED with a one-line reason (exit status and
// the output's last error line; no objective; objective not finite), PRUNED or INTERRUPTED.
// Stopping (prune, interrupt) is SIGTERM to the process group, SIGKILL after a grace period.
// It does not claim trials, choose slots or build commands: see sweep_runner.h.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "hwtrain/sweep/metrics_tail.h"
#include "hwtrain/sweep/pruner.h"
#include "hwtrain/sweep/study_store.h"
#include "hwtrain/sweep/sweep_config.h"
#include "hwtrain/sweep/trial_process.h"

namespace hwt::sweep {

// Where a trial runs: slot `index` of the sweep's trials_at_once, on GPU `gpu` (-1 = CPU) with
// `threads` intra-op threads.
struct Slot {
  int index = 0;
  int gpu = -1;
  int threads = 1;
};

struct TrialRunnerOptions {
  std::string objective = "val_loss";  // the metric read from metrics.jsonl
  Direction direction = Direction::kMin;
  std::int64_t at_step = 0;  // 0 = the last reported value is the objective
  // Seconds between SIGTERM and SIGKILL when a trial is stopped: lets the trainer exit cleanly
  // (flush logs) without letting a stuck one hold its slot.
  double kill_grace_s = 10.0;
  // Seconds between heartbeats while a trial reports nothing new; far below the store's 600 s
  // timeout, far above the cost of a write transaction.
  double heartbeat_interval_s = 10.0;
};

class TrialRunner {
 public:
  // Takes over the running `process` of `trial` (claimed by `store`), writing into `dir`.
  TrialRunner(Trial trial, Slot slot, std::filesystem::path dir, TrialProcess process,
              const TrialRunnerOptions& options, double now_s);

  // One step of the trial's life (never blocks). Returns true once the trial is over: finished in the
  // store (or taken over by another sweep process, which the store reports). `pruner` may be null.
  bool poll(StudyStore& store, const Pruner* pruner, double now_s);

  // Stops the process (SIGTERM, SIGKILL after the grace period); the trial is finished INTERRUPTED
  // with `reason` once it has exited, so the next sweep run retries it; unless it exits 0, which
  // hwtrain train does only when it had finished (a run cut short exits 128 + the signal).
  void interrupt(const std::string& reason, double now_s);

  const Trial& trial() const { return trial_; }  // its end state once poll() returned true
  const Slot& slot() const { return slot_; }
  double seconds() const { return seconds_; }    // wall time from start to end
  int num_bad_metric_lines() const { return tail_.num_bad_lines(); }
  // One line for the sweep's log once over: "trial 3 complete: val_loss 1.234 (12 s)".
  std::string summary() const;

 private:
  void read_metrics(StudyStore& store, const Pruner* pruner, double now_s);
  void stop(TrialState target, const std::string& reason, double now_s);
  void finish(StudyStore& store, double now_s);
  void decide_outcome();
  bool finished_before_stop() const;  // exited 0 after an interrupt: a complete trial
  std::string failure_reason() const;

  Trial trial_;
  Slot slot_;
  std::filesystem::path dir_;
  TrialProcess process_;
  TrialRunnerOptions options_;
  MetricsTail tail_;
  double started_s_ = 0.0;
  double last_heartbeat_s_ = 0.0;
  double seconds_ = 0.0;
  std::int64_t last_judged_step_ = INT64_MIN;
  std::optional<TrialState> stopping_;  // the end state a stop is heading for
  double kill_at_s_ = 0.0;              // when SIGKILL follows the SIGTERM
  bool killed_ = false;
  bool lost_ = false;  // the store says another process holds the trial now
};

}  // namespace hwt::sweep
