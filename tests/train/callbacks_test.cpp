// The built-in callbacks on scripted metric sequences, through a fake TrainerControl: early
// stopping, LR on plateau, LR monitor, Ctrl-C, best-checkpoint keeping, and the config factory.
#include <gtest/gtest.h>

#include <limits>
#include <signal.h>

#include "hwtrain/core/error.h"
#include "hwtrain/train/early_stopping.h"
#include "hwtrain/train/interrupt.h"
#include "hwtrain/train/lr_monitor.h"
#include "hwtrain/train/lr_plateau.h"
#include "hwtrain/train/model_checkpoint.h"
#include "support/temp_dir.h"
#include "train/fake_control.h"

namespace hwt {
namespace {

using testing::eval_record;
using testing::FakeTrainerControl;
using testing::step_record;

// Feeds val_loss values as evaluations at steps 1, 2, ...; the fake's weight is set to the step
// before each evaluation. Returns the number of evaluations fed before a stop was requested.
size_t feed_evals(Callback& cb, FakeTrainerControl& t, const std::vector<double>& values) {
  cb.on_train_begin(t);
  for (size_t i = 0; i < values.size(); ++i) {
    t.current_step = static_cast<int64_t>(i + 1);
    t.weight.fill_(static_cast<double>(i + 1));
    cb.on_evaluation_end(t, eval_record(t.current_step, values[i]));
    if (t.stop_requested()) return i + 1;
  }
  return values.size();
}

EarlyStoppingConfig early(int64_t patience, double min_delta = 0, const std::string& monitor = "val_loss",
                          MetricGoal mode = MetricGoal::kMin) {
  EarlyStoppingConfig c;
  c.enabled = true;
  c.patience = patience;
  c.min_delta = min_delta;
  c.monitor = monitor;
  c.mode = mode;
  return c;
}

TEST(EarlyStopping, StopsAfterPatienceChecksWithoutImprovement) {
  FakeTrainerControl t;
  EarlyStopping cb(early(3));
  EXPECT_EQ(feed_evals(cb, t, {3.0, 2.5, 2.6, 2.55, 2.7, 2.0}), 5u);
  EXPECT_NE(t.stop_reason.find("early stopping: val_loss"), std::string::npos) << t.stop_reason;
  EXPECT_NE(t.stop_reason.find("best 2.5 at step 2"), std::string::npos) << t.stop_reason;
  EXPECT_EQ(cb.watch().best(), 2.5);
}

TEST(EarlyStopping, ImprovementResetsPatience) {
  FakeTrainerControl t;
  EarlyStopping cb(early(2));
  EXPECT_EQ(feed_evals(cb, t, {3.0, 3.1, 2.9, 3.0, 2.8, 2.7}), 6u);
  EXPECT_FALSE(t.stop_requested());
}

TEST(EarlyStopping, MinDeltaIgnoresSmallImprovements) {
  FakeTrainerControl with_delta, without_delta;
  EarlyStopping a(early(2, 0.1)), b(early(2, 0.0));
  const std::vector<double> slow = {1.0, 0.95, 0.91, 0.88};
  EXPECT_EQ(feed_evals(a, with_delta, slow), 3u);
  EXPECT_TRUE(with_delta.stop_requested());
  feed_evals(b, without_delta, slow);
  EXPECT_FALSE(without_delta.stop_requested());
}

TEST(EarlyStopping, ModeMaxOnAStepMetric) {
  FakeTrainerControl rising, falling;
  EarlyStopping a(early(2, 0, "tokens_per_second", MetricGoal::kMax)), b(early(2, 0, "tokens_per_second", MetricGoal::kMax));
  for (EarlyStopping* cb : {&a, &b}) {
    FakeTrainerControl& t = cb == &a ? rising : falling;
    cb->on_train_begin(t);
    for (int s = 1; s <= 5; ++s) {
      StepMetrics m = step_record(s, 1.0);
      m.tokens_per_second = cb == &a ? 100.0 * s : 1000.0 - 100.0 * s;
      cb->on_step_end(t, m);
      cb->on_evaluation_end(t, eval_record(s, 99.0));  // other metric kinds are ignored
    }
  }
  EXPECT_FALSE(rising.stop_requested());
  EXPECT_TRUE(falling.stop_requested());
  EXPECT_NE(falling.stop_reason.find("2 steps"), std::string::npos) << falling.stop_reason;
}

TEST(EarlyStopping, RestoresTheBestWeightsWhenStopping) {
  FakeTrainerControl t;
  auto c = early(2);
  c.restore_best_weights = true;
  EarlyStopping cb(c);
  EXPECT_EQ(feed_evals(cb, t, {2.0, 1.0, 1.5, 1.2}), 4u);
  EXPECT_TRUE(cb.restored());
  EXPECT_EQ(t.num_restores, 1);
  EXPECT_EQ(t.weight[0].item<double>(), 2.0);  // the weights of step 2, where val_loss was 1.0
}

TEST(EarlyStopping, WithoutRestoreKeepsTheLastWeights) {
  FakeTrainerControl t;
  EarlyStopping cb(early(2));
  feed_evals(cb, t, {2.0, 1.0, 1.5, 1.2});
  EXPECT_EQ(t.num_snapshots, 0);
  EXPECT_EQ(t.num_restores, 0);
  EXPECT_EQ(t.weight[0].item<double>(), 4.0);
}

// A diverged loss (NaN) is a check without improvement, not a missing value: patience runs out.
TEST(EarlyStopping, ANonFiniteLossCountsAgainstPatience) {
  FakeTrainerControl t;
  EarlyStopping cb(early(2, 0, "loss"));
  cb.on_train_begin(t);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int s = 1; s <= 3 && !t.stop_requested(); ++s) cb.on_step_end(t, step_record(s, s == 1 ? 2.0 : nan));
  EXPECT_TRUE(t.stop_requested());
  EXPECT_EQ(cb.watch().best_step(), 1);
  EarlyStopping on_eval(early(1));
  on_eval.on_train_begin(t);
  on_eval.on_evaluation_end(t, eval_record(1, 2.0));
  on_eval.on_evaluation_end(t, eval_record(2, std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(on_eval.stopped());
}

TEST(EarlyStopping, RejectsBadOptions) {
  EXPECT_THROW(EarlyStopping{early(0)}, ConfigError);
  EXPECT_THROW(EarlyStopping{early(2, -1)}, ConfigError);
  EXPECT_THROW(EarlyStopping{early(2, 0, "accuracy")}, ConfigError);
}

LrPlateauConfig plateau(int64_t patience, double factor, int64_t cooldown = 0, double min_lr = 0) {
  LrPlateauConfig c;
  c.enabled = true;
  c.patience = patience;
  c.factor = factor;
  c.cooldown = cooldown;
  c.min_lr = min_lr;
  return c;
}

// Feeds val_loss values; returns the LR scale after each.
std::vector<double> scales_after(ReduceLROnPlateau& cb, FakeTrainerControl& t, const std::vector<double>& values) {
  std::vector<double> out;
  cb.on_train_begin(t);
  for (size_t i = 0; i < values.size(); ++i) {
    t.current_step = static_cast<int64_t>(i + 1);
    cb.on_evaluation_end(t, eval_record(t.current_step, values[i]));
    out.push_back(t.scale);
  }
  return out;
}

TEST(ReduceLROnPlateau, ReducesAfterPatience) {
  FakeTrainerControl t;
  ReduceLROnPlateau cb(plateau(2, 0.5));
  EXPECT_EQ(scales_after(cb, t, {1.0, 1.1, 1.2, 1.3, 1.4, 0.5, 0.6}),
            (std::vector<double>{1, 1, 0.5, 0.5, 0.25, 0.25, 0.25}));
  ASSERT_EQ(cb.reductions().size(), 2u);
  EXPECT_EQ(cb.reductions()[0].step, 3);
  EXPECT_EQ(cb.reductions()[1].old_scale, 0.5);
  EXPECT_FALSE(t.stop_requested());
}

TEST(ReduceLROnPlateau, CooldownDelaysTheNextReduction) {
  FakeTrainerControl t;
  ReduceLROnPlateau cb(plateau(2, 0.5, /*cooldown=*/2));
  // Reduction at check 3; checks 4 and 5 are the cooldown; 6 and 7 count; reduction at 7.
  EXPECT_EQ(scales_after(cb, t, {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6}),
            (std::vector<double>{1, 1, 0.5, 0.5, 0.5, 0.5, 0.25}));
}

TEST(ReduceLROnPlateau, NeverGoesBelowMinLr) {
  FakeTrainerControl t;
  t.run_options.train.lr = 1e-3;
  ReduceLROnPlateau cb(plateau(1, 0.5, 0, /*min_lr=*/3e-4));
  auto s = scales_after(cb, t, {1.0, 2.0, 2.0, 2.0, 2.0});
  EXPECT_EQ(s[1], 0.5);
  EXPECT_NEAR(s[2], 0.3, 1e-12);  // 0.25 would put the peak below min_lr
  EXPECT_NEAR(s[4], 0.3, 1e-12);
  EXPECT_EQ(cb.reductions().size(), 2u);
}

TEST(ReduceLROnPlateau, RejectsBadOptions) {
  EXPECT_THROW(ReduceLROnPlateau{plateau(2, 1.0)}, ConfigError);
  EXPECT_THROW(ReduceLROnPlateau{plateau(2, 0.0)}, ConfigError);
  EXPECT_THROW(ReduceLROnPlateau{plateau(0, 0.5)}, ConfigError);
  EXPECT_THROW(ReduceLROnPlateau{plateau(2, 0.5, -1)}, ConfigError);
}

TEST(LearningRateMonitor, SamplesEveryIntervalAndRecordsScaleChanges) {
  FakeTrainerControl t;
  t.run_options.train.lr = 1e-3;
  LrMonitorConfig c;
  c.enabled = true;
  c.interval = 3;
  LearningRateMonitor cb(c);
  cb.on_train_begin(t);
  for (int s = 1; s <= 9; ++s) {
    t.current_step = s;
    StepMetrics m = step_record(s, 1.0);
    m.lr = 1e-3 * t.scale * (1.0 - 0.01 * s);  // the schedule decays: not a change
    cb.on_step_end(t, m);
    if (s == 4) t.set_lr_scale(0.5);  // a callback after the monitor in this step
    if (s == 6) {
      t.set_lr_scale(0.25);  // a callback during an evaluation
      cb.on_evaluation_end(t, eval_record(s, 1.0));
    }
  }
  cb.on_train_end(t);
  std::vector<int64_t> sampled;
  for (const auto& x : cb.samples()) sampled.push_back(x.step);
  EXPECT_EQ(sampled, (std::vector<int64_t>{1, 3, 6, 9}));
  ASSERT_EQ(cb.changes().size(), 2u);
  EXPECT_EQ(cb.changes()[0].step, 5);
  EXPECT_EQ(cb.changes()[0].old_scale, 1.0);
  EXPECT_EQ(cb.changes()[0].new_scale, 0.5);
  EXPECT_EQ(cb.changes()[1].step, 6);
  EXPECT_DOUBLE_EQ(cb.changes()[1].peak_lr, 2.5e-4);
  EXPECT_EQ(cb.samples()[2].scale, 0.5);  // step 6, before the evaluation's change
  EXPECT_EQ(cb.samples()[3].scale, 0.25);
}

TEST(Interrupt, FlagMakesTheStopperRequestAStop) {
  FakeTrainerControl t;
  InterruptStopper cb;
  set_interrupt_signal(0);
  cb.on_train_begin(t);
  cb.on_step_end(t, step_record(1, 1.0));
  EXPECT_FALSE(t.stop_requested());
  set_interrupt_signal(SIGINT);
  cb.on_step_end(t, step_record(2, 1.0));
  EXPECT_EQ(t.stop_reason, "interrupted by SIGINT");
  cb.on_step_end(t, step_record(3, 1.0));
  EXPECT_EQ(t.num_requests, 1);
  // A later run (train_model in the same process, no scope) is not stopped by the earlier signal.
  FakeTrainerControl later;
  InterruptStopper again;
  again.on_train_begin(later);
  again.on_step_end(later, step_record(1, 1.0));
  EXPECT_FALSE(later.stop_requested());
  set_interrupt_signal(0);
}

TEST(Interrupt, FirstSignalOnlySetsTheFlagAndScopeRestoresTheHandler) {
  struct sigaction before {};
  ::sigaction(SIGTERM, nullptr, &before);
  {
    InterruptScope scope;
    EXPECT_EQ(interrupt_signal(), 0);
    ::raise(SIGTERM);  // would end the test process without the handler
    EXPECT_EQ(interrupt_signal(), SIGTERM);
    FakeTrainerControl t;
    InterruptStopper cb;
    cb.on_evaluation_end(t, eval_record(1, 1.0));
    EXPECT_EQ(t.stop_reason, "interrupted by SIGTERM");
    EXPECT_THROW(InterruptScope(), Error);  // scopes do not nest
  }
  struct sigaction after {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  EXPECT_EQ(interrupt_signal(), SIGTERM);  // readable after the scope (for the exit code)
  set_interrupt_signal(0);
}

TEST(InterruptDeathTest, SecondSignalExitsImmediately) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        InterruptScope scope;
        ::raise(SIGINT);
        ::raise(SIGINT);
        std::exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGINT), "");
}

TEST(ModelCheckpoint, KeepsTheBestEvaluationCheckpointBesideRotatingOnes) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  t.run_options.checkpoint.keep_last = 1;
  ModelCheckpointOptions o;
  o.every_steps = 1;
  o.monitor = "val_loss";
  ModelCheckpoint cb(o);
  cb.on_train_begin(t);
  const std::vector<double> val = {2.0, 1.5, 1.8, 1.7};
  for (int s = 1; s <= 4; ++s) {
    t.current_step = s;
    t.weight.fill_(10.0 * s);
    cb.on_step_end(t, step_record(s, 1.0));
    cb.on_evaluation_end(t, eval_record(s, val[s - 1]));
  }
  EXPECT_EQ(t.num_saves, 4);  // the improving evaluations reuse the step's checkpoint
  const auto best = dir / "checkpoints" / "best_val_loss";
  EXPECT_EQ(cb.best_path(), best);
  EXPECT_EQ(cb.best(), 1.5);
  EXPECT_EQ(read_checkpoint_manifest(best).step, 2);
  EXPECT_EQ(read_file(best / "weight.txt"), std::to_string(20.0));
  EXPECT_NO_THROW(verify_checkpoint(best));
  // Rotation kept only the newest step checkpoint and did not touch the best one.
  auto kept = CheckpointStore(dir / "checkpoints", 1).list();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].filename(), "step_00000004");
  EXPECT_EQ(resolve_checkpoint(best.string(), dir / "checkpoints"), best);
}

TEST(ModelCheckpoint, StepMetricIsComparedAtScheduledSaves) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  ModelCheckpointOptions o;
  o.every_steps = 2;
  o.monitor = "loss";
  o.save_final = false;
  ModelCheckpoint cb(o);
  cb.on_train_begin(t);
  const std::vector<double> loss = {0.1, 3.0, 5.0, 2.0, 2.5, 2.5};  // step 1's 0.1 is never saved
  for (int s = 1; s <= 6; ++s) {
    t.current_step = s;
    cb.on_step_end(t, step_record(s, loss[s - 1]));
  }
  EXPECT_EQ(t.num_saves, 3);
  EXPECT_EQ(read_checkpoint_manifest(dir / "checkpoints" / "best_loss").step, 4);
}

// A diverged step's weights may be NaN: it is not saved (nor the final one after it), so the
// rotation never drops the finite checkpoints saved before.
TEST(ModelCheckpoint, AStepWithANonFiniteLossIsNotSaved) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  t.run_options.checkpoint.keep_last = 2;
  ModelCheckpointOptions o;
  o.every_steps = 1;
  o.save_final = true;
  ModelCheckpoint cb(o);
  cb.on_train_begin(t);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> loss = {3.0, 2.5, nan, nan};
  for (int s = 1; s <= 4; ++s) {
    t.current_step = s;
    cb.on_step_end(t, step_record(s, loss[static_cast<size_t>(s - 1)]));
  }
  cb.on_train_end(t);
  EXPECT_EQ(t.num_saves, 2);
  auto kept = CheckpointStore(dir / "checkpoints", 2).list();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[1].filename(), "step_00000002");
  // Under a loss scaler a non-finite step skips its update (skipped_steps grows): the weights are
  // the last good ones, and the step is saved.
  t.current_step = 5;
  StepMetrics skipped = step_record(5, nan);
  skipped.skipped_steps = 1;
  cb.on_step_end(t, skipped);
  EXPECT_EQ(t.num_saves, 3);
}

TEST(ModelCheckpoint, SavesEveryMinutes) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  CheckpointConfig c;
  c.interval = 0;
  c.every_minutes = 1.0;
  ModelCheckpoint cb(checkpoint_options(c));
  cb.on_train_begin(t);
  for (int s = 1; s <= 10; ++s) {
    t.current_step = s;
    t.elapsed = 25.0 * s;  // due at 75 s (step 3), then at the first step 60 s after each save
    cb.on_step_end(t, step_record(s, 1.0));
  }
  EXPECT_EQ(t.num_saves, 3);
  auto kept = CheckpointStore(dir / "checkpoints", 3).list();
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].filename(), "step_00000003");
  EXPECT_EQ(kept[1].filename(), "step_00000006");
  EXPECT_EQ(kept[2].filename(), "step_00000009");
}

// The budget is named as set (a fractional budget read "0 s" before), and only once reached.
TEST(TimeBudgetStopper, StopsOnceTheBudgetIsReachedNamingIt) {
  testing::FakeTrainerControl t;
  TimeBudgetStopper stopper(0.5);
  t.elapsed = 0.4;
  stopper.on_step_end(t, testing::step_record(1, 2.0));
  EXPECT_FALSE(t.stop_requested());
  t.elapsed = 0.5;
  stopper.on_step_end(t, testing::step_record(2, 2.0));
  EXPECT_EQ(t.stop_reason, "time budget of 0.5 s reached");
}

}  // namespace
}  // namespace hwt
