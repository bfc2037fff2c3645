// TrialRunner (sweep/trial_runner.h) when the sweep stops a trial: hwtrain train exits 128 + the
// signal when one cuts its run short, so a trial that exits 0 after the stop had finished first and
// keeps its result; one that exits with the signal's status is interrupted (and retried later).
#include "hwtrain/sweep/trial_runner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "support/temp_dir.h"

namespace hwt::sweep {
namespace {

namespace fs = std::filesystem;

// A trainer that reports val_loss 1.5 at step 1, then waits; on SIGTERM it reports step 2 and exits
// with `exit_status`, as a finished (0) or a cut-short (143) hwtrain train would.
Trial run_stopped_trial(const hwt::testing::TempDir& dir, int exit_status) {
  const fs::path trial_dir = dir / ("trial-" + std::to_string(exit_status));
  fs::create_directories(trial_dir);
  const std::string metrics = (trial_dir / "metrics.jsonl").string();
  TrialLaunch launch;
  launch.argv = {"bash", "-c",
                 "trap 'echo \"{\\\"type\\\":\\\"eval\\\",\\\"step\\\":2,\\\"val_loss\\\":1.25}\" >> " + metrics +
                     "; exit " + std::to_string(exit_status) + "' TERM; "
                     "echo '{\"type\":\"eval\",\"step\":1,\"val_loss\":1.5}' >> " + metrics + "; touch " +
                     (trial_dir / "ready").string() + "; sleep 30 & wait"};
  StudyStore store = StudyStore::open((trial_dir / "study.db").string(), {"s", "space", "min", "val_loss", ""});
  std::optional<Trial> trial = store.claim([](const std::vector<Trial>&) { return Params{{"x", 1.0}}; }, 1);
  EXPECT_TRUE(trial);
  TrialRunnerOptions options;
  TrialRunner runner(*trial, Slot{}, trial_dir, TrialProcess::start(launch, trial_dir / "output.log"), options, 0.0);
  const auto nap = [] { std::this_thread::sleep_for(std::chrono::milliseconds(10)); };
  for (int i = 0; i < 500 && !fs::exists(trial_dir / "ready"); ++i) nap();
  runner.poll(store, nullptr, 0.1);
  runner.interrupt("sweep stopped by SIGINT (Ctrl-C)", 0.2);
  for (int i = 0; i < 500 && !runner.poll(store, nullptr, 0.3); ++i) nap();
  return store.trials().at(0);
}

TEST(TrialRunner, ATrialThatExitsZeroAfterTheStopHadFinishedAndKeepsItsResult) {
  hwt::testing::TempDir dir;
  const Trial finished = run_stopped_trial(dir, 0);
  EXPECT_EQ(finished.state, TrialState::kComplete) << finished.reason;
  ASSERT_TRUE(finished.value);
  EXPECT_DOUBLE_EQ(*finished.value, 1.25);  // the last value, written after the signal
  EXPECT_EQ(finished.reason, "");

  const Trial cut = run_stopped_trial(dir, 143);
  EXPECT_EQ(cut.state, TrialState::kInterrupted);
  EXPECT_EQ(cut.reason, "sweep stopped by SIGINT (Ctrl-C)");
  EXPECT_FALSE(cut.value);
}

}  // namespace
}  // namespace hwt::sweep
