// End-to-end tests of the sweep engine against a fake trainer (sweep/fake_trainer.h).
#include "hwtrain/sweep/sweep_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <set>
#include <thread>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/median_pruner.h"
#include "hwtrain/sweep/process_identity.h"
#include "hwtrain/sweep/random_sampler.h"
#include "hwtrain/sweep/grid_sampler.h"
#include "hwtrain/sweep/sweep_components.h"
#include "hwtrain/sweep/sweep_outputs.h"
#include "support/error_of.h"
#include "support/shell.h"
#include "support/temp_dir.h"
#include "sweep/fake_trainer.h"

namespace hwt::sweep {
namespace {

using hwt::testing::error_of;
using hwt::testing::read_text;
using hwt::testing::TempDir;
namespace fs = std::filesystem;

using namespace fake_trainer;  // NOLINT: the fake trainer and its sweep helpers

TEST(SweepRunner, RandomSweepOfSixTrialsCompletesWithTheBestTrial) {
  TempDir dir;
  const fs::path script = dir.write("fake_train.sh", kRunFakeTrainer);
  const auto file = dir.write("sweep.toml",
                              "[sweep]\nstudy = \"s.db\"\ntrials = 6\nsampler = \"random\"\nseed = 3\n"
                              "[sweep.space.x]\ntype = \"uniform\"\nlow = 0.0\nhigh = 0.85\n");
  const SweepConfig config = load_sweep_config(file, {}, {});
  StudyStore store = run_open_store(config);
  auto sampler = make_sampler(config);
  ParallelismInputs machine;
  machine.physical_cores = 2;
  std::vector<std::string> lines;
  SweepRunnerOptions options = run_options();
  options.log = [&](const std::string& line) { lines.push_back(line); };
  int threads_seen = 0;
  auto command = run_fake_command(script, [&](const Trial&, TrialLaunch& l) { threads_seen = std::stoi(l.argv.back().substr(30)); });
  SweepRunner runner(config, store, *sampler, nullptr, decide_trial_parallelism(machine), command, options);
  const SweepResult r = runner.run();

  ASSERT_EQ(r.trials.size(), 6u);
  EXPECT_EQ(r.num_started, 6);
  EXPECT_EQ(threads_seen, 1);  // 2 cores: 2 trials x 1 thread
  const Trial* expected_best = nullptr;
  for (std::size_t i = 0; i < r.trials.size(); ++i) {
    const Trial& t = r.trials[i];
    EXPECT_EQ(t.number, static_cast<std::int64_t>(i));
    ASSERT_EQ(t.state, TrialState::kComplete) << t.reason;
    EXPECT_NEAR(*t.value, run_expected_loss(run_x_of(t), 3), 1e-9);
    EXPECT_EQ(t.intermediate.size(), 3u);
    if (!expected_best || *t.value < *expected_best->value) expected_best = &t;
    EXPECT_TRUE(fs::exists(config.out_dir / "trials" / std::to_string(t.number) / "output.log"));
  }
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->number, expected_best->number);
  EXPECT_EQ(r.seconds.size(), 6u);
  EXPECT_NE(r.stop_reason.find("all 6 trials"), std::string::npos) << r.stop_reason;
  bool logged_bad_lines = false;
  for (const auto& l : lines) logged_bad_lines = logged_bad_lines || l.find("skipped 1 malformed line") != std::string::npos;
  EXPECT_TRUE(logged_bad_lines);
  // The outputs a sweep command writes from the result.
  const std::string table = format_trials_table(r.trials, "val_loss", Direction::kMin, r.seconds);
  EXPECT_EQ(table.find(std::to_string(r.best->number) + " "), table.find('\n') + 1) << table;
  write_best_config(config.out_dir / "best.toml", "", r.best->params, "best");
  EXPECT_NE(read_text(config.out_dir / "best.toml").find("x = "), std::string::npos);
}

TEST(SweepRunner, FailedTrialsKeepTheirReasonAndTheSweepGoesOn) {
  TempDir dir;
  const fs::path script = dir.write("fake_train.sh", kRunFakeTrainer);
  const SweepConfig config = run_grid_config(dir, {"0.2", "0.95", "nan", "quiet", "0.35"});
  StudyStore store = run_open_store(config);
  GridSampler sampler;
  SweepRunner runner(config, store, sampler, nullptr, run_slots(2), run_fake_command(script), run_options());
  const SweepResult r = runner.run();
  ASSERT_EQ(r.trials.size(), 5u);
  EXPECT_EQ(r.trials[0].state, TrialState::kComplete);
  EXPECT_EQ(r.trials[1].state, TrialState::kFailed);
  EXPECT_EQ(r.trials[1].reason, "exit code 3: error: out of memory (fake)");
  EXPECT_EQ(r.trials[2].state, TrialState::kFailed);
  EXPECT_EQ(r.trials[2].reason, "objective val_loss not finite (nan at step 3)");
  EXPECT_EQ(r.trials[3].state, TrialState::kFailed);
  EXPECT_EQ(r.trials[3].reason, "no val_loss reported; is train.eval_interval > 0?");
  EXPECT_EQ(r.trials[4].state, TrialState::kComplete);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->number, 4);
}

TEST(SweepRunner, MaxDirectionAndAtStepChooseTheObjective) {
  TempDir dir;
  const fs::path script = dir.write("fake_train.sh", kRunFakeTrainer);
  SweepConfig config = run_grid_config(dir, {"0.1", "0.6"});
  config.direction = Direction::kMax;
  config.at_step = 2;
  StudyStore store = run_open_store(config);
  GridSampler sampler;
  const SweepResult r = SweepRunner(config, store, sampler, nullptr, run_slots(1), run_fake_command(script), run_options()).run();
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->number, 1);
  EXPECT_NEAR(*r.best->value, -run_expected_loss(0.6, 2), 1e-9);  // stored minimized
  EXPECT_NEAR(r.trials[0].intermediate.at(3), -run_expected_loss(0.1, 3), 1e-9);
}

// A grid over x = 0.3, 0.35 and 0.9 with the median pruner after 2 trials; the bad trial (0.9)
// runs with `bad_env` (its fake trainer's settings) and would never crash.
SweepResult run_median_sweep(const TempDir& dir, std::vector<std::pair<std::string, std::string>> bad_env) {
  const fs::path script = dir.write("fake_train.sh", kRunFakeTrainer);
  const SweepConfig config = run_grid_config(dir, {"0.3", "0.35", "0.9"});
  StudyStore store = run_open_store(config);
  GridSampler sampler;
  MedianPrunerOptions mo;
  mo.n_startup_trials = 2;
  MedianPruner pruner(mo);
  bad_env.emplace_back("FAKE_CRASH_ABOVE", "2");
  auto bad = [&](const Trial& t, TrialLaunch& l) {
    if (std::get<std::string>(t.params.at("x")) == "0.9") l.env = bad_env;
  };
  SweepRunner runner(config, store, sampler, &pruner, run_slots(1), run_fake_command(script, bad), run_options());
  return runner.run();
}

TEST(SweepRunner, MedianPrunerStopsABadTrialAndItsProcess) {
  TempDir dir;
  // The bad trial would run 3 x 30 s: only pruning ends it in time.
  const auto start = std::chrono::steady_clock::now();
  const SweepResult r = run_median_sweep(dir, {{"FAKE_STEP_SLEEP", "30"}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  ASSERT_EQ(r.trials.size(), 3u);
  EXPECT_EQ(r.trials[0].state, TrialState::kComplete);
  EXPECT_EQ(r.trials[1].state, TrialState::kComplete);
  EXPECT_EQ(r.trials[2].state, TrialState::kPruned) << r.trials[2].reason;
  EXPECT_NE(r.trials[2].reason.find("pruned at step 1 by median"), std::string::npos) << r.trials[2].reason;
  EXPECT_NEAR(r.trials[2].value.value_or(0), run_expected_loss(0.9, 1), 1e-9);
  EXPECT_FALSE(local_process_alive(run_trainer_pid(dir / "study" / "trials/2"), 0));
}

// Steps that arrive in one read (metrics are flushed in batches) are judged one by one on what came
// up to each: at step 1 the bad trial's best is its step-1 value (1.36 against the median 1.0),
// not its step-3 value (0.69) that the same read brought, so it is pruned at step 1.
TEST(SweepRunner, StepsReadTogetherAreJudgedOnTheValuesUpToEach) {
  TempDir dir;
  const SweepResult r = run_median_sweep(dir, {{"FAKE_END_SLEEP", "30"}});  // three steps at once, then idle
  ASSERT_EQ(r.trials.size(), 3u);
  EXPECT_EQ(r.trials[2].state, TrialState::kPruned) << r.trials[2].reason;
  EXPECT_NE(r.trials[2].reason.find("pruned at step 1 by median"), std::string::npos) << r.trials[2].reason;
}

TEST(SweepRunner, TimeBudgetStopsNewTrialsAndLetsRunningOnesFinish) {
  TempDir dir;
  const fs::path script = dir.write("fake_train.sh", kRunFakeTrainer);
  SweepConfig config = run_grid_config(dir, {"0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8"});
  config.time_budget_seconds = 1.0;
  StudyStore store = run_open_store(config);
  GridSampler sampler;
  auto slow = [](const Trial&, TrialLaunch& l) { l.env = {{"FAKE_STEP_SLEEP", "0.4"}}; };  // >= 1.2 s a trial
  const SweepResult r = SweepRunner(config, store, sampler, nullptr, run_slots(1), run_fake_command(script, slow), run_options()).run();
  EXPECT_GE(r.trials.size(), 1u);
  EXPECT_LE(r.trials.size(), 2u);
  for (const Trial& t : r.trials) EXPECT_EQ(t.state, TrialState::kComplete) << t.reason;
  EXPECT_NE(r.stop_reason.find("time budget of 1 s reached"), std::string::npos) << r.stop_reason;
}

TEST(SweepRunner, KilledSweepResumesKeepingCompletedTrialsAndRetryingTheInterruptedOnce) {
  TempDir dir;
  const fs::path script = dir.write("fake_train.sh", kRunFakeTrainer);
  const SweepConfig config = run_grid_config(dir, {"0.1", "0.2", "0.3", "0.4"});
  // Trial 2's first attempt sleeps long; its retry does not.
  auto sleepy_first_attempt = [](const Trial& t, TrialLaunch& l) {
    if (t.number == 2 && t.attempts == 1) l.env = {{"FAKE_STEP_SLEEP", "30"}};
  };
  const pid_t sweep = fork();
  ASSERT_GE(sweep, 0);
  if (sweep == 0) {
    try {
      StudyStore store = run_open_store(config);
      GridSampler sampler;
      SweepRunner(config, store, sampler, nullptr, run_slots(1), run_fake_command(script, sleepy_first_attempt), run_options()).run();
    } catch (...) {
    }
    _exit(0);
  }
  const fs::path trial2 = config.out_dir / "trials/2";
  const bool reached = run_wait_for([&] { return fs::exists(trial2 / "metrics.jsonl") && run_trainer_pid(trial2) > 0; }, 60);
  ::kill(sweep, SIGKILL);
  int status = 0;
  ::waitpid(sweep, &status, 0);
  ASSERT_TRUE(reached) << "trial 2 never started";
  const std::int64_t orphan = run_trainer_pid(trial2);
  EXPECT_TRUE(run_wait_for([&] { return !local_process_alive(orphan, 0); }, 20)) << "trainer outlived its sweep";

  StudyStore store = run_open_store(config);
  GridSampler sampler;
  std::vector<std::int64_t> started;
  const SweepResult r =
      SweepRunner(config, store, sampler, nullptr, run_slots(1), run_fake_command(script, sleepy_first_attempt, &started), run_options()).run();
  EXPECT_EQ(started, (std::vector<std::int64_t>{2, 3}));
  ASSERT_EQ(r.trials.size(), 4u);
  std::set<std::int64_t> numbers;
  for (const Trial& t : r.trials) {
    numbers.insert(t.number);
    EXPECT_EQ(t.state, TrialState::kComplete) << t.number << ": " << t.reason;
    EXPECT_EQ(t.attempts, t.number == 2 ? 2 : 1) << t.number;
  }
  EXPECT_EQ(numbers, (std::set<std::int64_t>{0, 1, 2, 3}));
}

TEST(SweepRunner, SigtermStopsTheSweepAndMarksItsTrialsInterrupted) {
  TempDir dir;
  const fs::path script = dir.write("fake_train.sh", kRunFakeTrainer);
  const SweepConfig config = run_grid_config(dir, {"0.1", "0.2"});
  auto sleepy = [](const Trial& t, TrialLaunch& l) {
    if (t.attempts == 1) l.env = {{"FAKE_STEP_SLEEP", "30"}};
  };
  const pid_t sweep = fork();
  ASSERT_GE(sweep, 0);
  if (sweep == 0) {
    int code = 1;
    try {
      StudyStore store = run_open_store(config);
      GridSampler sampler;
      SweepRunnerOptions o = run_options();
      o.handle_signals = true;
      const SweepResult r = SweepRunner(config, store, sampler, nullptr, run_slots(2), run_fake_command(script, sleepy), o).run();
      code = r.interrupted && r.stop_reason.find("stopped by SIGTERM") != std::string::npos ? 0 : 2;
    } catch (...) {
      code = 3;
    }
    _exit(code);
  }
  const bool reached = run_wait_for([&] {
    return run_trainer_pid(config.out_dir / "trials/0") > 0 && run_trainer_pid(config.out_dir / "trials/1") > 0;
  }, 60);
  ::kill(sweep, SIGTERM);
  int status = 0;
  ::waitpid(sweep, &status, 0);
  ASSERT_TRUE(reached);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int n = 0; n < 2; ++n) {
    EXPECT_FALSE(local_process_alive(run_trainer_pid(config.out_dir / "trials" / std::to_string(n)), 0));
  }
  StudyStore store = run_open_store(config);
  for (const Trial& t : store.trials()) {
    EXPECT_EQ(t.state, TrialState::kInterrupted) << t.number;
    EXPECT_NE(t.reason.find("sweep stopped by SIGTERM"), std::string::npos) << t.reason;
  }
  GridSampler sampler;
  const SweepResult r = SweepRunner(config, store, sampler, nullptr, run_slots(2), run_fake_command(script, sleepy), run_options()).run();
  ASSERT_EQ(r.trials.size(), 2u);
  for (const Trial& t : r.trials) EXPECT_EQ(t.state, TrialState::kComplete) << t.reason;
}

TEST(SweepRunner, ACommandThatCannotRunStopsTheSweepAndLeavesTheTrialForTheNextRun) {
  TempDir dir;
  const SweepConfig config = run_grid_config(dir, {"0.1", "0.2"});
  StudyStore store = run_open_store(config);
  GridSampler sampler;
  TrialCommand missing = [&](const Trial&, const fs::path&, const Slot&) {
    TrialLaunch l;
    l.argv = {(dir / "no-such-hwtrain").string()};
    return l;
  };
  SweepRunner runner(config, store, sampler, nullptr, run_slots(1), missing, run_options());
  const std::string message = error_of<IoError>([&] { runner.run(); });
  EXPECT_NE(message.find("cannot run"), std::string::npos) << message;
  const auto trials = store.trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kInterrupted);
  EXPECT_NE(trials[0].reason.find("could not start: cannot run"), std::string::npos) << trials[0].reason;
  // A start that fails is not the trial's attempt: twice more, and it still has its retry.
  for (int again = 0; again < 2; ++again) {
    SweepRunner more(config, store, sampler, nullptr, run_slots(1), missing, run_options());
    (void)error_of<IoError>([&] { more.run(); });
  }
  ASSERT_EQ(store.trials().size(), 1u);
  EXPECT_EQ(store.trials()[0].state, TrialState::kInterrupted) << store.trials()[0].reason;
  EXPECT_EQ(store.trials()[0].attempts, 0);
  const fs::path script = dir.write("fake_train.sh", kRunFakeTrainer);
  const SweepResult r =
      SweepRunner(config, store, sampler, nullptr, run_slots(1), run_fake_command(script), run_options()).run();
  ASSERT_EQ(r.trials.size(), 2u);
  EXPECT_EQ(r.trials[0].state, TrialState::kComplete) << r.trials[0].reason;
  EXPECT_EQ(r.trials[0].attempts, 1);  // its first run
}

}  // namespace
}  // namespace hwt::sweep
