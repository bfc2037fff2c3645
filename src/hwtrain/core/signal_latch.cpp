#include "hwtrain/core/signal_latch.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <exception>

#include "hwtrain/core/error.h"

namespace hwt {

namespace {
// The innermost live latch; a lock-free atomic, so the handler may read it.
std::atomic<SignalLatch*> g_current{nullptr};
static_assert(std::atomic<SignalLatch*>::is_always_lock_free, "the current latch must be lock-free");
static_assert(std::atomic<int>::is_always_lock_free, "a latch's flag must be lock-free");
static_assert(std::atomic<int64_t>::is_always_lock_free, "the first signal's time must be lock-free");

// The first signal's sender and time (CLOCK_MONOTONIC, ns): the same signal from another sender
// within kSameStopWindowNs is the same stop request delivered twice, as when Slurm or systemd
// signals every process of a job and hwtrain launch forwards its own copy to the ranks.
std::atomic<int> g_first_sender{0};
std::atomic<int64_t> g_first_at_ns{0};
constexpr int64_t kSameStopWindowNs = 2'000'000'000;

int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

SignalLatch::SignalLatch(SignalLatchOptions options) : options_(std::move(options)), outer_(g_current.load()) {
  if (!options_.flag) throw Error("SignalLatch: no flag to record the signal in");
  g_first_at_ns.store(0);  // this latch's first signal is yet to come
  g_current.store(this);
  struct sigaction sa {};
  sa.sa_sigaction = &SignalLatch::on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO | (options_.restart ? SA_RESTART : 0);
  replaced_.resize(options_.signals.size());
  for (size_t i = 0; i < options_.signals.size(); ++i) ::sigaction(options_.signals[i], &sa, &replaced_[i]);
}

SignalLatch::~SignalLatch() {
  for (size_t i = 0; i < options_.signals.size(); ++i) ::sigaction(options_.signals[i], &replaced_[i], nullptr);
  // Latches end in the reverse order of their start (one thread's scopes); any other order would
  // leave the handler a latch that no longer exists.
  SignalLatch* self = this;
  if (!g_current.compare_exchange_strong(self, outer_)) std::terminate();
}

void SignalLatch::on_signal(int sig, siginfo_t* info, void*) {
  SignalLatch* latch = g_current.load();
  if (!latch) return;
  const int sender = info != nullptr ? static_cast<int>(info->si_pid) : 0;
  int expected = 0;
  if (latch->options_.flag->compare_exchange_strong(expected, sig)) {
    g_first_sender.store(sender);
    g_first_at_ns.store(std::max<int64_t>(1, monotonic_ns()));
    if (const char* text = latch->options_.message) {
      ssize_t ignored = ::write(STDERR_FILENO, text, ::strlen(text));  // async-signal-safe
      (void)ignored;
    }
    return;
  }
  if (!latch->options_.second_exits) return;
  // The first signal's handler (on another thread) may not have recorded it yet: wait a moment
  // (bounded: a flag set without a handler, or a handler this one interrupted, never records).
  int64_t first_at = g_first_at_ns.load();
  for (int spin = 0; first_at == 0 && spin < 1000000; ++spin) first_at = g_first_at_ns.load();
  if (expected == sig && first_at != 0 && sender != g_first_sender.load() &&
      monotonic_ns() - first_at < kSameStopWindowNs) {
    return;  // the same stop request from a second sender (the job manager's and the launcher's)
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace hwt
