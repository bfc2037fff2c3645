// The sweep engine's tests' fake trainer (sweep_runner_test.cpp): a bash script that reads its
// --set x=... and writes metrics.jsonl eval records with val_loss = (x - 0.3)^2 + 1/step, for
// FAKE_STEPS steps (default 3), sleeping FAKE_STEP_SLEEP seconds after each. x = "quiet" writes
// nothing, x = "nan" writes null, x above FAKE_CRASH_ABOVE (default 0.9) exits 3 with "error: out of
// memory". With the helpers that run sweeps of it.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "hwtrain/sweep/study_store.h"
#include "hwtrain/sweep/sweep_components.h"
#include "hwtrain/sweep/sweep_config.h"
#include "hwtrain/sweep/sweep_runner.h"
#include "hwtrain/sweep/trial_process.h"
#include "support/shell.h"
#include "support/temp_dir.h"

namespace hwt::sweep::fake_trainer {

using hwt::testing::read_text;
using hwt::testing::TempDir;
namespace fs = std::filesystem;

inline const char* const kRunFakeTrainer = R"SH(#!/bin/bash
out=""; x=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --set) case "$2" in x=*) x="${2#x=}" ;; esac; shift 2 ;;
    *) shift ;;
  esac
done
echo $$ > "$out/pid"
echo "fake trainer: x=$x"
echo "this line is not JSON" >> "$out/metrics.jsonl"
steps=${FAKE_STEPS:-3}
for ((step = 1; step <= steps; step++)); do
  if [ "$x" = quiet ]; then
    :
  elif [ "$x" = nan ]; then
    echo "{\"type\":\"eval\",\"step\":$step,\"val_loss\":null}" >> "$out/metrics.jsonl"
  else
    if awk -v x="$x" -v c="${FAKE_CRASH_ABOVE:-0.9}" 'BEGIN { exit !(x > c) }'; then
      echo "error: out of memory (fake)" >&2
      echo "shutting down"
      exit 3
    fi
    v=$(awk -v x="$x" -v s="$step" 'BEGIN { printf "%.12g", (x - 0.3) ^ 2 + 1 / s }')
    echo "{\"type\":\"step\",\"step\":$step,\"loss\":2.5}" >> "$out/metrics.jsonl"
    echo "{\"type\":\"eval\",\"step\":$step,\"val_loss\":$v}" >> "$out/metrics.jsonl"
  fi
  if [ "${FAKE_STEP_SLEEP:-0}" != 0 ]; then sleep "$FAKE_STEP_SLEEP"; fi
done
if [ "${FAKE_END_SLEEP:-0}" != 0 ]; then sleep "$FAKE_END_SLEEP"; fi
exit 0
)SH";

inline double run_expected_loss(double x, int step) { return (x - 0.3) * (x - 0.3) + 1.0 / step; }

inline double run_x_of(const Trial& t) {
  const ParamValue& v = t.params.at("x");
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::stod(std::get<std::string>(v));
}

// A grid sweep over the choice literals `xs`, one trial each, study and trials under `dir`.
inline SweepConfig run_grid_config(const TempDir& dir, const std::vector<std::string>& xs) {
  SweepConfig c;
  c.study = dir / "study.db";
  c.out_dir = dir / "study";
  c.trials = static_cast<int>(xs.size());
  c.sampler = SamplerKind::kGrid;
  ParamSpec p;
  p.key = "x";
  p.kind = ParamKind::kChoice;
  p.choices = xs;
  c.space.params = {p};
  return c;
}

inline TrialParallelism run_slots(int n) {
  TrialParallelism p;
  p.trials_at_once = n;
  p.gpu_of_slot.assign(n, -1);
  p.reason = "test";
  return p;
}

inline SweepRunnerOptions run_options() {
  SweepRunnerOptions o;
  o.poll_interval_s = 0.05;
  o.kill_grace_s = 3.0;
  o.handle_signals = false;
  return o;
}

using RunTweak = std::function<void(const Trial&, TrialLaunch&)>;

// The fake trainer's command; records each started trial number in `started` when given.
inline TrialCommand run_fake_command(const fs::path& script, RunTweak tweak = {},
                                     std::vector<std::int64_t>* started = nullptr) {
  return [=](const Trial& trial, const fs::path& dir, const Slot& slot) {
    TrialLaunch l;
    l.argv = {"bash", script.string(), "--out", dir.string()};
    for (const auto& [k, v] : trial.params) l.argv.insert(l.argv.end(), {"--set", k + "=" + to_override_value(v)});
    l.argv.insert(l.argv.end(), {"--set", "optimization.intra_op_threads=" + std::to_string(slot.threads)});
    if (tweak) tweak(trial, l);
    if (started) started->push_back(trial.number);
    return l;
  };
}

inline StudyStore run_open_store(const SweepConfig& c) {
  return StudyStore::open(c.study.string(), make_study_info(c));
}

inline bool run_wait_for(const std::function<bool()>& done, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

inline std::int64_t run_trainer_pid(const fs::path& trial_dir) {
  const std::string text = read_text(trial_dir / "pid");
  return text.empty() ? -1 : std::stoll(text);
}

}  // namespace hwt::sweep::fake_trainer
