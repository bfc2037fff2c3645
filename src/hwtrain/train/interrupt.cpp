#include "hwtrain/train/interrupt.h"

#include <signal.h>

#include <atomic>
#include <string>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace {

std::atomic<int> g_signal{0};
std::atomic<bool> g_scope_active{false};

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

}  // namespace

InterruptScope::InterruptScope() {
  if (g_scope_active.exchange(true)) throw Error("InterruptScope: a scope is already active");
  g_signal.store(0);
  SignalLatchOptions o;
  o.flag = &g_signal;
  o.message = "\nhwtrain: interrupted; stopping after this step (final checkpoint and report follow). "
              "Press Ctrl-C again to exit now.\n";
  latch_ = std::make_unique<SignalLatch>(o);
}

InterruptScope::~InterruptScope() {
  latch_.reset();
  g_scope_active.store(false);
}

int interrupt_signal() { return g_signal.load(); }

void set_interrupt_signal(int signal) { g_signal.store(signal); }

void InterruptStopper::on_step_end(TrainerControl& t, const StepMetrics&) { check(t); }

void InterruptStopper::on_evaluation_end(TrainerControl& t, const EvalMetrics&) { check(t); }

void InterruptStopper::check(TrainerControl& t) {
  const int sig = interrupt_signal();
  if (sig == 0 || sig == before_ || reported_) return;
  reported_ = true;
  log_warn("interrupted by {} at step {}: stopping; the final checkpoint and report are being written",
           signal_name(sig), t.step());
  t.request_stop("interrupted by " + signal_name(sig));
}

}  // namespace hwt
