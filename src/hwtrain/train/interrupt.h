// Ctrl-C handling for training. While an InterruptScope is alive, the first SIGINT or SIGTERM only
// sets a flag (the handler is async-signal-safe: one atomic store and one write(2)); the
// InterruptStopper callback turns the flag into TrainerControl::request_stop at the end of the
// current step, so the final evaluation, checkpoint, sink flush and report still happen. A second
// signal restores the default action and re-raises it: the process exits at once (core/signal_latch.h).
// In distributed runs each rank sees its own signal; the stop must be agreed on collectively
// (the trainer's business), or ranks that stop early leave the others waiting in all-reduce.
#pragma once
#include <memory>

#include "hwtrain/core/signal_latch.h"
#include "hwtrain/train/callback.h"

namespace hwt {

// Installs the handlers for SIGINT and SIGTERM and clears the flag; the destructor restores the
// handlers found at construction. Scopes do not nest (a second live scope is an error).
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  std::unique_ptr<SignalLatch> latch_;
};

// The signal received since the scope began (SIGINT, SIGTERM), or 0.
int interrupt_signal();
// Test hook and programmatic stop: behaves as if the first `signal` had arrived (0 clears).
void set_interrupt_signal(int signal);

// Requests a stop ("interrupted by SIGINT") at the end of the step during which a signal arrived.
class InterruptStopper : public Callback {
 public:
  std::string name() const override { return "interrupt"; }
  // A signal already latched when the run begins (a former scope's, kept for its exit code) is not
  // this run's: only one that arrives during it stops it.
  void on_train_begin(TrainerControl&) override {
    reported_ = false;
    before_ = interrupt_signal();
  }
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;
  void on_evaluation_end(TrainerControl& t, const EvalMetrics& m) override;

 private:
  void check(TrainerControl& t);
  bool reported_ = false;
  int before_ = 0;
};

}  // namespace hwt
