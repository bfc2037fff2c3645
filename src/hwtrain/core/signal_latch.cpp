#include "hwtrain/core/signal_latch.h"

#include <string.h>
#include <unistd.h>

#include <exception>

#include "hwtrain/core/error.h"

namespace hwt {

namespace {
// The innermost live latch; a lock-free atomic, so the handler may read it.
std::atomic<SignalLatch*> g_current{nullptr};
static_assert(std::atomic<SignalLatch*>::is_always_lock_free, "the current latch must be lock-free");
static_assert(std::atomic<int>::is_always_lock_free, "a latch's flag must be lock-free");
}  // namespace

SignalLatch::SignalLatch(SignalLatchOptions options) : options_(std::move(options)), outer_(g_current.load()) {
  if (!options_.flag) throw Error("SignalLatch: no flag to record the signal in");
  g_current.store(this);
  struct sigaction sa {};
  sa.sa_handler = &SignalLatch::on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = options_.restart ? SA_RESTART : 0;
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

void SignalLatch::on_signal(int sig) {
  SignalLatch* latch = g_current.load();
  if (!latch) return;
  int expected = 0;
  if (latch->options_.flag->compare_exchange_strong(expected, sig)) {
    if (const char* text = latch->options_.message) {
      ssize_t ignored = ::write(STDERR_FILENO, text, ::strlen(text));  // async-signal-safe
      (void)ignored;
    }
    return;
  }
  if (!latch->options_.second_exits) return;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace hwt
