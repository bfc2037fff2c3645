#include "hwtrain/sweep/trial_runner.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <fstream>
#include <vector>

#include "hwtrain/core/strings.h"
#include "hwtrain/sweep/trial_codec.h"

namespace hwt::sweep {
namespace {

// The last non-empty line of `log` that mentions "error" (any case), else its last non-empty line;
// only the file's last 64 KiB are read, and the line is cut to 300 characters.
std::string last_error_line(const std::filesystem::path& log) {
  std::ifstream in(log, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 65536);
  in.seekg(from);
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  std::string last, last_error;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    last = line;
    std::string lower = line;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower.find("error") != std::string::npos) last_error = line;
  }
  std::string line = last_error.empty() ? last : last_error;
  if (line.size() > 300) line = line.substr(0, 297) + "...";
  return line;
}

std::string objective_hint(const std::string& objective) {
  if (objective.rfind("val_", 0) == 0) return "; is train.eval_interval > 0?";
  return "; does the trainer log it?";
}

}  // namespace

TrialRunner::TrialRunner(Trial trial, Slot slot, std::filesystem::path dir, TrialProcess process,
                         const TrialRunnerOptions& options, double now_s)
    : trial_(std::move(trial)),
      slot_(slot),
      dir_(std::move(dir)),
      process_(std::move(process)),
      options_(options),
      tail_(dir_ / "metrics.jsonl", options.objective),
      started_s_(now_s),
      last_heartbeat_s_(now_s) {
  trial_.intermediate.clear();  // a retry runs from the start (the store dropped its values too)
}

// hwtrain train exits 128 + the signal when one cuts its run short: a trial told to stop that still
// exits 0 had finished first, and its result stands (it would be rerun otherwise).
bool TrialRunner::finished_before_stop() const {
  return stopping_ == TrialState::kInterrupted && !lost_ && process_.succeeded();
}

bool TrialRunner::poll(StudyStore& store, const Pruner* pruner, double now_s) {
  const bool exited = process_.poll();
  if (!stopping_ || (exited && finished_before_stop())) read_metrics(store, exited ? nullptr : pruner, now_s);
  if (!exited) {
    if (stopping_) {
      if (!killed_ && now_s >= kill_at_s_) {
        process_.signal_group(SIGKILL);
        killed_ = true;
      }
    } else if (now_s - last_heartbeat_s_ >= options_.heartbeat_interval_s) {
      last_heartbeat_s_ = now_s;
      if (!store.heartbeat(trial_.number)) {
        lost_ = true;
        stop(TrialState::kInterrupted, "another sweep process took this trial over", now_s);
      }
    }
    return false;
  }
  seconds_ = now_s - started_s_;
  finish(store, now_s);
  return true;
}

void TrialRunner::read_metrics(StudyStore& store, const Pruner* pruner, double now_s) {
  const std::vector<MetricPoint> points = tail_.read_new();
  if (points.empty()) return;
  std::vector<std::int64_t> new_steps;
  for (const MetricPoint& p : points) {
    const double minimized = options_.direction == Direction::kMax ? -p.value : p.value;
    trial_.intermediate[p.step] = minimized;
    if (!store.report(trial_.number, p.step, minimized)) {
      lost_ = true;
      stop(TrialState::kInterrupted, "another sweep process took this trial over", now_s);
      return;
    }
    last_heartbeat_s_ = now_s;
    if (p.step > last_judged_step_ && (new_steps.empty() || p.step > new_steps.back())) new_steps.push_back(p.step);
  }
  if (!pruner || new_steps.empty()) return;
  const std::vector<Trial> history = store.trials();
  for (const std::int64_t step : new_steps) {
    last_judged_step_ = step;
    // The trial as it stood at `step`: one read brings several steps (metrics are flushed in
    // batches), and the later ones must not count as what came before it.
    Trial upto = trial_;
    upto.intermediate.erase(upto.intermediate.upper_bound(step), upto.intermediate.end());
    const PruneDecision d = pruner->decide(upto, step, history);
    if (d.prune) {
      stop(TrialState::kPruned, "pruned at step " + std::to_string(step) + " by " + pruner->name() + ": " + d.reason, now_s);
      return;
    }
  }
}

void TrialRunner::stop(TrialState target, const std::string& reason, double now_s) {
  if (stopping_) return;
  stopping_ = target;
  trial_.reason = reason;
  kill_at_s_ = now_s + options_.kill_grace_s;
  process_.signal_group(SIGTERM);
}

void TrialRunner::interrupt(const std::string& reason, double now_s) { stop(TrialState::kInterrupted, reason, now_s); }

void TrialRunner::decide_outcome() {
  trial_.value.reset();
  if (stopping_ && !finished_before_stop()) {
    trial_.state = *stopping_;
    if (*stopping_ == TrialState::kPruned && !trial_.intermediate.empty()) {
      trial_.value = trial_.intermediate.rbegin()->second;
    }
    return;
  }
  trial_.state = TrialState::kFailed;
  if (!process_.succeeded()) {
    const std::string line = last_error_line(dir_ / "output.log");
    trial_.reason = process_.describe_exit() + (line.empty() ? "" : ": " + line);
    return;
  }
  const std::string& name = options_.objective;
  std::optional<std::pair<std::int64_t, double>> objective;
  if (options_.at_step > 0) {
    const auto it = trial_.intermediate.find(options_.at_step);
    if (it == trial_.intermediate.end()) {
      trial_.reason = "no " + name + " reported at step " + std::to_string(options_.at_step) + " (sweep.at_step)" +
                      (trial_.intermediate.empty() ? objective_hint(name)
                                                   : "; last reported step " + std::to_string(trial_.intermediate.rbegin()->first));
      return;
    }
    objective = *it;
  } else if (!trial_.intermediate.empty()) {
    objective = *trial_.intermediate.rbegin();
  } else {
    trial_.reason = "no " + name + " reported" + objective_hint(name);
    return;
  }
  if (!std::isfinite(objective->second)) {
    trial_.reason = "objective " + name + " not finite (" + format_number("%g", objective->second) + " at step " +
                    std::to_string(objective->first) + ")";
    return;
  }
  trial_.state = TrialState::kComplete;
  trial_.value = objective->second;
  trial_.reason.clear();
}

void TrialRunner::finish(StudyStore& store, double now_s) {
  (void)now_s;
  decide_outcome();
  if (lost_) return;  // the store would refuse: another process holds the trial
  if (!store.finish(trial_.number, trial_.state, trial_.value, trial_.reason)) lost_ = true;
}

std::string TrialRunner::summary() const {
  std::string s = "trial " + std::to_string(trial_.number) + " " + trial_state_name(trial_.state);
  if (trial_.value) {
    const double shown = options_.direction == Direction::kMax ? -*trial_.value : *trial_.value;
    s += ": " + options_.objective + " " + format_number("%.6g", shown);
  }
  if (!trial_.reason.empty()) s += (trial_.value ? "; " : ": ") + trial_.reason;
  if (lost_) s += " (not recorded: another sweep process holds this trial now)";
  return s + " (" + format_number("%.0f", seconds_) + " s)";
}

}  // namespace hwt::sweep
