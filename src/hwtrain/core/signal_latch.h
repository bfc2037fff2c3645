// SignalLatch: a scoped handler for stop signals (SIGINT and SIGTERM by default). While one is
// alive, the first signal is only recorded in the caller's flag (an async-signal-safe atomic
// compare-exchange from 0) and `message` is written to stderr (write(2)); with second_exits, a
// second signal restores the default action and re-raises it, so the process ends at once, unless
// it is the same signal from another sender within 2 s: one stop request delivered twice (Slurm or
// systemd signal every process of the job, and hwtrain launch forwards its copy to the ranks). The
// destructor restores the handlers found at construction. Latches nest: the innermost live latch
// receives the signals, and the handlers it replaced (an outer latch's) come back after it; they
// must end in the reverse order of their start (std::terminate otherwise).
// The training loop (train/interrupt.h), the sweep and the Python module each hold one.
#pragma once
#include <signal.h>

#include <atomic>
#include <vector>

namespace hwt {

struct SignalLatchOptions {
  std::atomic<int>* flag = nullptr;   // where the first signal is recorded; the owner clears it
  const char* message = nullptr;      // written on the first signal (nullptr: nothing)
  std::vector<int> signals = {SIGINT, SIGTERM};
  bool restart = true;                // SA_RESTART: file writes do not fail with EINTR
  bool second_exits = true;           // a second signal ends the process (default action)
};

class SignalLatch {
 public:
  explicit SignalLatch(SignalLatchOptions options);
  ~SignalLatch();
  SignalLatch(const SignalLatch&) = delete;
  SignalLatch& operator=(const SignalLatch&) = delete;

 private:
  static void on_signal(int sig, siginfo_t* info, void* context);
  SignalLatchOptions options_;
  SignalLatch* outer_;
  std::vector<struct sigaction> replaced_;
};

}  // namespace hwt
