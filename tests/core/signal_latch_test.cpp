// SignalLatch: the first stop signal is recorded; a second from the same sender ends the process,
// while the same signal from another sender within 2 s is one stop request delivered twice (Slurm
// or systemd signal every process of a job, and hwtrain launch forwards its copy to the ranks).
#include "hwtrain/core/signal_latch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace hwt {
namespace {

// Forks a child that latches SIGTERM, signals itself when `self_first`, reports the first signal on
// a pipe, and exits 0 if it is still alive a second after; the parent sends SIGTERM once or twice.
int child_status(bool self_first, int parent_sends) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::atomic<int> flag{0};
    SignalLatchOptions o;
    o.flag = &flag;
    o.signals = {SIGTERM};
    SignalLatch latch(o);
    if (self_first) ::kill(::getpid(), SIGTERM);
    while (flag.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    char c = 1;
    (void)!::write(ready[1], &c, 1);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    ::_exit(0);
  }
  ::close(ready[1]);
  if (!self_first) ::kill(pid, SIGTERM);
  char c = 0;
  (void)!::read(ready[0], &c, 1);  // the first signal was handled: the next is not merged with it
  for (int i = self_first ? 0 : 1; i < parent_sends; ++i) ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(ready[0]);
  return status;
}

TEST(SignalLatch, TheSameSignalFromAnotherSenderIsOneRequest) {
  const int status = child_status(/*self_first=*/true, /*parent_sends=*/1);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(SignalLatch, ASecondSignalFromTheSameSenderEndsTheProcess) {
  const int status = child_status(/*self_first=*/false, /*parent_sends=*/2);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

}  // namespace
}  // namespace hwt
