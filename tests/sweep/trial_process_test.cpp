#include "hwtrain/sweep/trial_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/process_identity.h"
#include "support/error_of.h"
#include "support/shell.h"
#include "support/temp_dir.h"

namespace hwt::sweep {
namespace {

using hwt::testing::error_of;
using hwt::testing::read_text;
using hwt::testing::TempDir;

// Polls until the process exits; false after `seconds`.
bool proc_wait_exit(TrialProcess& p, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!p.poll()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(TrialProcess, RunsWithExtraEnvironmentAndLogsBothStreams) {
  TempDir dir;
  TrialLaunch launch;
  launch.argv = {"bash", "-c", "echo out $FAKE_VAR; echo err >&2; exit 3"};
  launch.env = {{"FAKE_VAR", "hello"}};
  TrialProcess p = TrialProcess::start(launch, dir / "output.log");
  ASSERT_TRUE(proc_wait_exit(p, 30));
  EXPECT_FALSE(p.succeeded());
  EXPECT_EQ(p.describe_exit(), "exit code 3");
  EXPECT_EQ(read_text(dir / "output.log"), "out hello\nerr\n");
}

TEST(TrialProcess, AProgramThatCannotRunIsASetupError) {
  TempDir dir;
  TrialLaunch launch;
  launch.argv = {(dir / "no-such-trainer").string()};
  const std::string message = error_of<IoError>([&] { TrialProcess::start(launch, dir / "output.log"); });
  EXPECT_NE(message.find("cannot run '" + launch.argv[0] + "': No such file"), std::string::npos) << message;
}

TEST(TrialProcess, SignalReachesTheWholeGroupAndTheDestructorKills) {
  TempDir dir;
  TrialLaunch launch;
  launch.argv = {"bash", "-c", "sleep 30 & echo $! > " + (dir / "child").string() + "; wait"};
  TrialProcess p = TrialProcess::start(launch, dir / "output.log");
  for (int i = 0; i < 500 && read_text(dir / "child").empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::int64_t grandchild = std::stoll(read_text(dir / "child"));
  p.signal_group(SIGTERM);
  ASSERT_TRUE(proc_wait_exit(p, 30));
  EXPECT_NE(p.describe_exit().find("SIGTERM"), std::string::npos) << p.describe_exit();
  for (int i = 0; i < 500 && local_process_alive(grandchild, 0); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(local_process_alive(grandchild, 0));

  launch.argv = {"sleep", "30"};
  pid_t pid = -1;
  {
    TrialProcess q = TrialProcess::start(launch, dir / "output2.log");
    pid = q.pid();
  }
  EXPECT_FALSE(local_process_alive(pid, 0));
}

}  // namespace
}  // namespace hwt::sweep
