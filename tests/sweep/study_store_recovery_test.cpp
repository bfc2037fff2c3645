// The study store's fault handling: a sweep process killed mid-trial (SIGKILL), a heartbeat that
// stops, a process taken for dead that wakes up, and intermediate values.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/study_store.h"
#include "support/temp_dir.h"

namespace hwt::sweep {
namespace {

using hwt::testing::TempDir;

StudyInfo recovery_test_info() { return {"demo", "space-fp-1", "max", "tokens_per_s", ""}; }

Params recovery_test_params(const std::vector<Trial>& history) {
  return Params{{"lr", 3e-4 * static_cast<double>(history.size() + 1)}, {"batch", std::int64_t{32}}};
}

// Forks a child that opens the study, claims a trial (a retry or a new one), reports step 10 and
// tells the parent; the parent then kills it with SIGKILL and reaps it. Returns the claimed number,
// or -1 if the child claimed nothing or failed.
std::int64_t claim_in_child_then_sigkill(const std::string& path, int max_trials) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::close(fds[0]);
    std::int64_t number = -1;
    try {
      auto store = StudyStore::open(path, recovery_test_info());
      if (auto t = store.claim(recovery_test_params, max_trials)) {
        if (store.report(t->number, 10, 0.5)) number = t->number;
      }
    } catch (...) {
    }
    if (::write(fds[1], &number, sizeof(number)) != sizeof(number)) ::_exit(1);
    for (;;) ::pause();  // mid-trial until killed
  }
  ::close(fds[1]);
  std::int64_t number = -1;
  const bool got = ::read(fds[0], &number, sizeof(number)) == sizeof(number);
  ::close(fds[0]);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return got ? number : -1;
}

TEST(StudyStoreRecovery, KilledTrialIsMarkedAndRetriedOnceWithSameParams) {
  TempDir dir;
  const std::string path = (dir / "sweep.db").string();
  ASSERT_EQ(claim_in_child_then_sigkill(path, 1), 0);
  auto store = StudyStore::open(path, recovery_test_info());
  auto before = store.trials();
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].state, TrialState::kRunning);  // nobody has noticed yet
  EXPECT_EQ(before[0].intermediate.size(), 1u);

  // The rerun's claim marks it interrupted and takes it back; the retry creates no trial, so it
  // happens even though the study already has its max_trials = 1.
  auto retry = store.claim(recovery_test_params, 1);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->number, 0);
  EXPECT_EQ(retry->state, TrialState::kRunning);
  EXPECT_EQ(retry->attempts, 2);
  EXPECT_EQ(retry->params, before[0].params);
  EXPECT_NE(retry->reason.find("died mid-trial"), std::string::npos) << retry->reason;
  EXPECT_TRUE(retry->intermediate.empty());  // the retry starts over
  EXPECT_FALSE(store.claim(recovery_test_params, 1).has_value());  // its own live trial is not retried
  EXPECT_TRUE(store.finish(0, TrialState::kComplete, -1234.5, ""));
  const auto after = store.trials();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].state, TrialState::kComplete);
  EXPECT_EQ(after[0].attempts, 2);
  EXPECT_EQ(after[0].value, std::optional<double>(-1234.5));
}

TEST(StudyStoreRecovery, TrialInterruptedTwiceFails) {
  TempDir dir;
  const std::string path = (dir / "sweep.db").string();
  ASSERT_EQ(claim_in_child_then_sigkill(path, 2), 0);
  ASSERT_EQ(claim_in_child_then_sigkill(path, 2), 0);  // the second process retries 0 and dies too
  auto store = StudyStore::open(path, recovery_test_info());
  auto next = store.claim(recovery_test_params, 2);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->number, 1);  // trial 0 is not tried a third time
  const auto all = store.trials();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].state, TrialState::kFailed);
  EXPECT_EQ(all[0].attempts, 2);
  EXPECT_NE(all[0].reason.find("interrupted twice"), std::string::npos) << all[0].reason;
  EXPECT_NE(all[0].reason.find("died mid-trial"), std::string::npos) << all[0].reason;
  EXPECT_FALSE(all[0].value.has_value());
}

TEST(StudyStoreRecovery, SilentWorkerLosesTrialAndCannotOverwriteIt) {
  TempDir dir;
  const std::string path = (dir / "sweep.db").string();
  auto clock_now = std::make_shared<double>(1000.0);
  auto options_for = [&](const std::string& worker) {
    StudyStoreOptions options;
    options.worker = worker;
    options.heartbeat_timeout_s = 600.0;
    options.clock = [clock_now] { return *clock_now; };
    return options;
  };
  auto a = StudyStore::open(path, recovery_test_info(), options_for("node-a:11"));
  auto b = StudyStore::open(path, recovery_test_info(), options_for("node-b:22"));
  ASSERT_EQ(a.claim(recovery_test_params, 2)->number, 0);
  EXPECT_FALSE(b.finish(0, TrialState::kComplete, 1.0, ""));  // not b's trial
  EXPECT_FALSE(b.heartbeat(0));
  EXPECT_FALSE(b.report(0, 1, 1.0));

  *clock_now += 599.0;  // within the timeout: b gets a new trial, a keeps its own
  ASSERT_EQ(b.claim(recovery_test_params, 2)->number, 1);
  *clock_now += 1.0;
  EXPECT_TRUE(a.heartbeat(0));
  EXPECT_TRUE(a.report(0, 5, 0.25));

  *clock_now += 601.0;  // a falls silent past the timeout; b's own trial 1 is never taken from it
  auto taken = b.claim(recovery_test_params, 2);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->number, 0);
  EXPECT_EQ(taken->attempts, 2);
  EXPECT_NE(taken->reason.find("node-a:11 sent no heartbeat for 601 s (timeout 600 s)"), std::string::npos)
      << taken->reason;

  // a wakes up: everything it writes is refused, and b's run of trial 0 stands.
  EXPECT_FALSE(a.heartbeat(0));
  EXPECT_FALSE(a.report(0, 6, 0.1));
  EXPECT_FALSE(a.finish(0, TrialState::kComplete, 0.1, ""));
  EXPECT_TRUE(b.finish(0, TrialState::kComplete, 0.2, ""));
  EXPECT_TRUE(b.finish(1, TrialState::kPruned, 0.3, "pruned at step 5"));
  const auto all = a.trials();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].value, std::optional<double>(0.2));
  EXPECT_TRUE(all[0].intermediate.empty());
  EXPECT_EQ(all[1].state, TrialState::kPruned);
}

TEST(StudyStoreRecovery, IntermediateValuesAreOrderedAndReplaced) {
  TempDir dir;
  auto store = StudyStore::open((dir / "sweep.db").string(), recovery_test_info());
  ASSERT_TRUE(store.claim(recovery_test_params, 1).has_value());
  for (const std::int64_t step : {300, 100, 200}) EXPECT_TRUE(store.report(0, step, static_cast<double>(step) / 10));
  EXPECT_TRUE(store.report(0, 100, 9.5));  // the same step again replaces its value
  EXPECT_TRUE(store.report(0, 400, std::numeric_limits<double>::quiet_NaN()));  // a diverged step is kept
  auto t = store.trials().at(0);
  std::vector<std::int64_t> steps;
  for (const auto& [step, value] : t.intermediate) steps.push_back(step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{100, 200, 300, 400}));
  EXPECT_EQ(t.intermediate.at(100), 9.5);
  EXPECT_EQ(t.intermediate.at(300), 30.0);
  EXPECT_TRUE(std::isnan(t.intermediate.at(400)));

  EXPECT_THROW((void)store.finish(0, TrialState::kRunning, std::nullopt, ""), ConfigError);
  EXPECT_TRUE(store.finish(0, TrialState::kComplete, std::numeric_limits<double>::quiet_NaN(), ""));
  EXPECT_FALSE(store.trials().at(0).value.has_value());  // a NaN objective is stored as none
  EXPECT_FALSE(store.finish(0, TrialState::kFailed, std::nullopt, "again"));  // finished trials stay
  EXPECT_FALSE(store.report(0, 500, 1.0));
  EXPECT_FALSE(store.heartbeat(0));
  EXPECT_FALSE(store.heartbeat(99));  // no such trial
  EXPECT_EQ(store.trials().at(0).intermediate.size(), 4u);
}

TEST(StudyStoreRecovery, GracefullyInterruptedTrialIsRetried) {
  TempDir dir;
  auto store = StudyStore::open((dir / "sweep.db").string(), recovery_test_info());
  auto first = store.claim(recovery_test_params, 1);
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(store.finish(0, TrialState::kInterrupted, std::nullopt, "SIGTERM (Slurm preemption)"));
  auto retry = store.claim(recovery_test_params, 1);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(retry->number, 0);
  EXPECT_EQ(retry->attempts, 2);
  EXPECT_EQ(retry->params, first->params);
}

}  // namespace
}  // namespace hwt::sweep
