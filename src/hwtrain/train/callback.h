// Callback: the interface through which everything that watches or steers a run plugs into the
// trainer loop (checkpointing, metric sinks, progress, early stopping, LR-on-plateau, time budget).
// TrainerControl is what a callback may see and do: read the step and metrics, stop the run,
// scale the learning rate, save a checkpoint, snapshot or restore the weights.
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/io/safetensors.h"
#include "hwtrain/obs/metrics.h"

namespace hwt {

struct TrainerOptions;
struct Plan;

// What a callback carries across a resume: named numbers (a watch's best, its step, counters). Each
// checkpoint saves them in trainer_state.json ("callbacks", by callback name); a resumed run hands
// them back right after on_train_begin, so that a best, a patience or a cooldown continues where
// the checkpoint left it.
using CallbackState = std::map<std::string, double>;

class TrainerControl {
 public:
  virtual ~TrainerControl() = default;
  virtual int64_t step() const = 0;  // optimizer steps completed
  virtual double elapsed_seconds() const = 0;
  virtual const TrainerOptions& options() const = 0;  // the schedule, checkpoint placement, ...
  virtual const Plan& plan() const = 0;
  virtual const std::filesystem::path& run_dir() const = 0;
  virtual void request_stop(const std::string& reason) = 0;
  virtual bool stop_requested() const = 0;
  virtual double lr_scale() const = 0;  // multiplies the scheduled learning rate
  virtual void set_lr_scale(double scale) = 0;
  virtual std::filesystem::path save_checkpoint() = 0;  // writes one now (rank 0), returns its path
  virtual NamedTensors snapshot_weights() const = 0;   // detached copies
  virtual void restore_weights(const NamedTensors& weights) = 0;
  // Whether the loop evaluates after the step_end of `step` (train.eval_interval, with validation data).
  virtual bool evaluates_at(int64_t /*step*/) const { return false; }
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual std::string name() const = 0;
  virtual void on_train_begin(TrainerControl&) {}
  virtual void on_step_end(TrainerControl&, const StepMetrics&) {}
  virtual void on_evaluation_end(TrainerControl&, const EvalMetrics&) {}
  virtual void on_checkpoint(TrainerControl&, const std::filesystem::path& /*checkpoint*/) {}
  virtual void on_train_end(TrainerControl&) {}
  virtual CallbackState state() const { return {}; }
  virtual void load_state(const CallbackState&) {}
};

// Calls each callback in the order added, and adds up the wall time each one takes on the
// training thread (two clock reads per call): what logging and callbacks cost a run.
class CallbackList {
 public:
  void add(std::shared_ptr<Callback> c) {
    callbacks_.push_back(std::move(c));
    seconds_.push_back(0.0);
  }
  const std::vector<std::shared_ptr<Callback>>& all() const { return callbacks_; }
  void train_begin(TrainerControl& t) { each([&](Callback& c) { c.on_train_begin(t); }); }
  void step_end(TrainerControl& t, const StepMetrics& m) { each([&](Callback& c) { c.on_step_end(t, m); }); }
  void evaluation_end(TrainerControl& t, const EvalMetrics& m) {
    each([&](Callback& c) { c.on_evaluation_end(t, m); });
  }
  void checkpoint(TrainerControl& t, const std::filesystem::path& p) {
    each([&](Callback& c) { c.on_checkpoint(t, p); });
  }
  void train_end(TrainerControl& t) { each([&](Callback& c) { c.on_train_end(t); }); }
  // Every callback's non-empty state by name (a repeated name gets "#2", "#3", ... in order).
  std::map<std::string, CallbackState> states() const {
    std::map<std::string, CallbackState> out;
    for (const auto& [key, c] : keyed()) {
      if (CallbackState s = c->state(); !s.empty()) out[key] = std::move(s);
    }
    return out;
  }
  // Hands each callback the state saved under its key, if any.
  void load_states(const std::map<std::string, CallbackState>& states) {
    for (const auto& [key, c] : keyed()) {
      if (auto it = states.find(key); it != states.end()) c->load_state(it->second);
    }
  }
  // Seconds spent in callback i so far (all hooks together), in the order added.
  const std::vector<double>& seconds() const { return seconds_; }

 private:
  std::vector<std::pair<std::string, Callback*>> keyed() const {
    std::vector<std::pair<std::string, Callback*>> out;
    std::map<std::string, int> seen;
    for (const auto& c : callbacks_) {
      const std::string name = c->name();
      const int n = ++seen[name];
      out.emplace_back(n == 1 ? name : name + "#" + std::to_string(n), c.get());
    }
    return out;
  }

  template <class Fn>
  void each(Fn&& fn) {
    for (size_t i = 0; i < callbacks_.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      fn(*callbacks_[i]);
      seconds_[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }

  std::vector<std::shared_ptr<Callback>> callbacks_;
  std::vector<double> seconds_;
};

}  // namespace hwt
