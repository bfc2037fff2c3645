// run_ordered_pipeline: items come out in order whatever the workers' timing, and a machine that
// cannot start the threads asked for gets an error naming the count, not an abort.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "hwtrain/data/ordered_pipeline.h"

namespace hwt {
namespace {

std::vector<int> run(int workers, int items) {
  int next = 0;
  std::vector<int> out;
  run_ordered_pipeline<int>([&](int& x) { return next < items ? (x = next++, true) : false; },
                            [](int& x) { x *= 3; }, [&](int& x) { out.push_back(x); }, workers, 4);
  return out;
}

TEST(OrderedPipeline, ItemsComeOutInOrder) {
  const std::vector<int> out = run(3, 100);
  ASSERT_EQ(out.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(out[i], 3 * i);
}

// The process's virtual size now, in bytes (/proc/self/statm's first field, in pages).
long virtual_bytes() {
  std::ifstream in("/proc/self/statm");
  long pages = 0;
  in >> pages;
  return pages * ::sysconf(_SC_PAGESIZE);
}

TEST(OrderedPipeline, ThreadsThatCannotStartAreAnErrorNotAnAbort) {
  if (virtual_bytes() <= 0) GTEST_SKIP() << "no /proc/self/statm";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Room for a few 8 MiB thread stacks, not for 256 of them.
    const rlimit limit{static_cast<rlim_t>(virtual_bytes() + (64L << 20)), RLIM_INFINITY};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    try {
      run(256, 10);
    } catch (const std::runtime_error& e) {
      ::_exit(std::string(e.what()).find("cannot start worker thread") != std::string::npos &&
                      std::string(e.what()).find("of 256") != std::string::npos
                  ? 0
                  : 1);
    }
    ::_exit(2);  // every thread started: the limit did not bite
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status) << " (an abort is the bug)";
  if (WEXITSTATUS(status) == 2) GTEST_SKIP() << "the address-space limit did not stop thread creation here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace hwt
