#include "hwtrain/sweep/sweep_runner.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <limits>
#include <thread>

#include "hwtrain/core/error.h"
#include "hwtrain/core/signal_latch.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/sweep/grid_sampler.h"

namespace hwt::sweep {
namespace {

std::atomic<int> g_sweep_stop_signal{0};  // the signal that asked the sweep to stop, -1 = request_stop(), 0 = none

// SIGINT/SIGTERM stop the sweep for the duration of run() (core/signal_latch.h); without
// SA_RESTART, so that the poll's sleep ends at once. A second signal is recorded no more.
std::unique_ptr<SignalLatch> sweep_signal_latch(bool install) {
  g_sweep_stop_signal.store(0);
  if (!install) return nullptr;
  SignalLatchOptions o;
  o.flag = &g_sweep_stop_signal;
  o.restart = false;
  o.second_exits = false;
  return std::make_unique<SignalLatch>(o);
}

double sweep_clock_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string params_text(const Params& params) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : params) parts.push_back(key + "=" + to_override_value(value));
  return join(parts, " ");
}

std::string stop_signal_name(int sig) { return sig == SIGINT ? "SIGINT (Ctrl-C)" : sig == SIGTERM ? "SIGTERM" : "a stop request"; }

}  // namespace

std::optional<Trial> best_trial(const std::vector<Trial>& trials) {
  std::optional<Trial> best;
  for (const Trial& t : trials) {
    if (t.state != TrialState::kComplete || !t.value || std::isnan(*t.value)) continue;
    if (!best || *t.value < *best->value) best = t;
  }
  return best;
}

void SweepRunner::request_stop() { g_sweep_stop_signal.store(-1); }

SweepRunner::SweepRunner(SweepConfig config, StudyStore& store, Sampler& sampler, const Pruner* pruner,
                         TrialParallelism parallelism, TrialCommand command, SweepRunnerOptions options)
    : config_(std::move(config)),
      store_(store),
      sampler_(sampler),
      pruner_(pruner),
      parallelism_(std::move(parallelism)),
      command_(std::move(command)),
      options_(std::move(options)),
      max_trials_(config_.trials) {
  if (parallelism_.gpu_of_slot.empty() || !command_) {
    throw ConfigError("sweep: no trial slot or no trial command; decide_trial_parallelism gives at least one slot");
  }
  if (dynamic_cast<const GridSampler*>(&sampler_)) {
    const std::size_t grid = GridSampler::size(config_.space);
    if (grid < static_cast<std::size_t>(max_trials_)) {
      max_trials_ = static_cast<int>(grid);
      say("sweep: the grid has " + std::to_string(grid) + " combinations; sweep.trials = " +
          std::to_string(config_.trials) + " capped to " + std::to_string(grid));
    }
  }
  slots_.resize(parallelism_.gpu_of_slot.size());
}

void SweepRunner::say(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void SweepRunner::start_trial(Trial trial, const Slot& slot, double now_s) {
  const std::filesystem::path dir = config_.out_dir / "trials" / std::to_string(trial.number);
  try {
    std::filesystem::remove_all(dir);  // a retry starts from a clean directory
    std::filesystem::create_directories(dir);
    TrialProcess process = TrialProcess::start(command_(trial, dir, slot), dir / "output.log");
    TrialRunnerOptions o;
    o.objective = config_.objective;
    o.direction = config_.direction;
    o.at_step = config_.at_step;
    o.kill_grace_s = options_.kill_grace_s;
    o.heartbeat_interval_s = options_.heartbeat_interval_s;
    say("trial " + std::to_string(trial.number) + (trial.attempts > 1 ? " (retry)" : "") + " started in slot " +
        std::to_string(slot.index) + (slot.gpu >= 0 ? " (GPU " + std::to_string(slot.gpu) + ")" : "") + ": " +
        params_text(trial.params));
    slots_[static_cast<std::size_t>(slot.index)].emplace(std::move(trial), slot, dir, std::move(process), o, now_s);
    ++result_.num_started;
  } catch (const std::exception& e) {
    // Not the trial's fault: give it back for the next run, then stop the sweep.
    (void)store_.release(trial.number, std::string("could not start: ") + e.what());
    throw;
  }
}

bool SweepRunner::fill_slots(double now_s, double deadline_s) {
  for (std::size_t i = 0; i < slots_.size() && !no_more_trials_; ++i) {
    if (slots_[i]) continue;
    if (now_s >= deadline_s) {
      no_more_trials_ = true;
      result_.stop_reason = "time budget of " + format_number("%g", config_.time_budget_seconds) + " s reached";
      say("sweep: " + result_.stop_reason + "; no new trial starts");
      break;
    }
    const auto sample = [this](const std::vector<Trial>& history) {
      const std::int64_t number = history.empty() ? 0 : history.back().number + 1;
      return sampler_.sample(config_.space, history, trial_seed(config_.seed, number));
    };
    std::optional<Trial> trial = store_.claim(sample, max_trials_);
    if (!trial) {
      no_more_trials_ = true;
      result_.stop_reason = "all " + std::to_string(max_trials_) + " trials of the study were created";
      break;
    }
    Slot slot;
    slot.index = static_cast<int>(i);
    slot.gpu = parallelism_.gpu_of_slot[i];
    slot.threads = parallelism_.threads_per_trial;
    start_trial(std::move(*trial), slot, now_s);
  }
  return !no_more_trials_;
}

void SweepRunner::poll_running(double now_s) {
  for (auto& slot : slots_) {
    if (!slot || !slot->poll(store_, pruner_, now_s)) continue;
    say(slot->summary());
    if (slot->num_bad_metric_lines() > 0) {
      say("trial " + std::to_string(slot->trial().number) + ": skipped " + std::to_string(slot->num_bad_metric_lines()) +
          " malformed line(s) of metrics.jsonl");
    }
    result_.seconds[slot->trial().number] = slot->seconds();
    slot.reset();
  }
}

void SweepRunner::stop_all(const std::string& reason, double now_s) {
  for (auto& slot : slots_) {
    if (slot) slot->interrupt(reason, now_s);
  }
  // Each stopped trial gets its grace period, then SIGKILL; wait for all of them to be recorded.
  const auto any_running = [this] {
    for (const auto& slot : slots_) {
      if (slot) return true;
    }
    return false;
  };
  while (any_running()) {
    poll_running(sweep_clock_s());
    if (any_running()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

SweepResult SweepRunner::run() {
  const auto signals = sweep_signal_latch(options_.handle_signals);
  result_ = SweepResult{};
  no_more_trials_ = false;
  const double start_s = sweep_clock_s();
  const double deadline_s = config_.time_budget_seconds > 0 ? start_s + config_.time_budget_seconds
                                                            : std::numeric_limits<double>::infinity();
  say("sweep: study " + store_.path() + ", " + std::to_string(max_trials_) + " trials, sampler " + sampler_.name() +
      ", pruner " + (pruner_ ? pruner_->name() : std::string("none")) + "; " + parallelism_.reason);
  const auto poll_sleep = std::chrono::duration<double>(options_.poll_interval_s);
  try {
    for (;;) {
      const double now_s = sweep_clock_s();
      if (const int sig = g_sweep_stop_signal.load(); sig != 0) {
        result_.interrupted = true;
        result_.stop_reason = "stopped by " + stop_signal_name(sig) +
                              "; running trials were marked interrupted and are retried by the next run";
        say("sweep: " + result_.stop_reason);
        stop_all("sweep stopped by " + stop_signal_name(sig), now_s);
        break;
      }
      if (!no_more_trials_) fill_slots(now_s, deadline_s);
      poll_running(now_s);
      bool any = false;
      for (const auto& slot : slots_) any = any || slot.has_value();
      if (!any && no_more_trials_) break;
      std::this_thread::sleep_for(poll_sleep);
    }
  } catch (const std::exception& e) {
    stop_all(std::string("sweep stopped: ") + e.what(), sweep_clock_s());
    throw;
  }
  result_.trials = store_.trials();
  result_.best = best_trial(result_.trials);
  return result_;
}

}  // namespace hwt::sweep
