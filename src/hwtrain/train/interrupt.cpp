#include "hwtrain/train/interrupt.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace {

// Signal-handler state must be global; lock-free atomics are async-signal-safe.
std::atomic<int> g_signal{0};
std::atomic<bool> g_scope_active{false};
struct sigaction g_old_int, g_old_term;
static_assert(std::atomic<int>::is_always_lock_free, "the interrupt flag must be lock-free");

void write_stderr(const char* text) {
  // write(2) is async-signal-safe; its result is irrelevant here.
  ssize_t ignored = ::write(STDERR_FILENO, text, ::strlen(text));
  (void)ignored;
}

void on_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    write_stderr(
        "\nhwtrain: interrupted; stopping after this step (final checkpoint and report follow). "
        "Press Ctrl-C again to exit now.\n");
    return;
  }
  // Second signal: give up on a clean stop.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

}  // namespace

InterruptScope::InterruptScope() {
  if (g_scope_active.exchange(true)) throw Error("InterruptScope: a scope is already active");
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // file writes of sinks and checkpoints must not fail with EINTR
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptScope::~InterruptScope() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_scope_active.store(false);
}

int interrupt_signal() { return g_signal.load(); }

void set_interrupt_signal(int signal) { g_signal.store(signal); }

void InterruptStopper::on_step_end(TrainerControl& t, const StepMetrics&) { check(t); }

void InterruptStopper::on_evaluation_end(TrainerControl& t, const EvalMetrics&) { check(t); }

void InterruptStopper::check(TrainerControl& t) {
  const int sig = interrupt_signal();
  if (sig == 0 || reported_) return;
  reported_ = true;
  log_warn("interrupted by {} at step {}: stopping; the final checkpoint and report are being written",
           signal_name(sig), t.step());
  t.request_stop("interrupted by " + signal_name(sig));
}

}  // namespace hwt
