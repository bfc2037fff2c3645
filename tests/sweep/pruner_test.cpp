#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/asha_pruner.h"
#include "hwtrain/sweep/median_pruner.h"

namespace hwt::sweep {
namespace {

Trial pruner_trial(std::int64_t number, TrialState state, std::map<std::int64_t, double> intermediate) {
  Trial t;
  t.number = number;
  t.state = state;
  t.intermediate = std::move(intermediate);
  if (state == TrialState::kComplete && !t.intermediate.empty()) t.value = t.intermediate.rbegin()->second;
  return t;
}

// Trials 0..values.size()-1, each complete with one report `values[i]` at `step`.
std::vector<Trial> pruner_history_at(std::int64_t step, const std::vector<double>& values,
                                     TrialState state = TrialState::kComplete) {
  std::vector<Trial> h;
  for (std::size_t i = 0; i < values.size(); ++i) h.push_back(pruner_trial(static_cast<std::int64_t>(i), state, {{step, values[i]}}));
  return h;
}

constexpr std::int64_t kPrunerCurrent = 99;  // the number of the trial being judged

// --- ASHA --------------------------------------------------------------------------------------

TEST(AshaPruner, RungStepsFollowMinResourceTimesEtaPowers) {
  EXPECT_EQ(AshaPruner().rung_steps(30), (std::vector<std::int64_t>{1, 3, 9, 27}));
  AshaPrunerOptions o;
  o.min_resource = 2;
  o.min_early_stopping_rate = 1;
  EXPECT_EQ(AshaPruner(o).rung_steps(100), (std::vector<std::int64_t>{6, 18, 54}));
  o.reduction_factor = 4;
  o.min_early_stopping_rate = 0;
  EXPECT_EQ(AshaPruner(o).rung_steps(128), (std::vector<std::int64_t>{2, 8, 32, 128}));
  EXPECT_EQ(AshaPruner(o).rung_step(100), std::numeric_limits<std::int64_t>::max());  // saturates
}

TEST(AshaPruner, KeepsTopOneOverEtaAtARung) {
  const AshaPruner asha;  // rungs 1, 3, 9, ...
  // Five others at rung step 1; with this trial n = 6, so the best floor(6 / 3) = 2 go on: 1 and 2.
  const auto h = pruner_history_at(1, {4, 1, 5, 2, 3});
  auto judge = [&](double v) { return asha.decide(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{1, v}}), 1, h); };
  EXPECT_FALSE(judge(0.5).prune);
  EXPECT_FALSE(judge(1.5).prune);  // second best
  EXPECT_FALSE(judge(2.0).prune);  // ties go on
  const auto d = judge(2.5);
  EXPECT_TRUE(d.prune);
  EXPECT_NE(d.reason.find("value 2.5 is not among the best 2 of 6 at rung 0 (step 1) (cut-off 2)"), std::string::npos) << d.reason;
}

TEST(AshaPruner, EarlyTrialsNeedToBeTheBestSoFar) {
  const AshaPruner asha;
  // Alone at the rung: top max(1, 0) = 1 of 1, promoted.
  EXPECT_FALSE(asha.should_prune(pruner_trial(0, TrialState::kRunning, {{1, 7.0}}), 1, {}));
  // n = 2 and n = 3 keep only the best one.
  const auto h1 = pruner_history_at(1, {3.0});
  EXPECT_TRUE(asha.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{1, 4.0}}), 1, h1));
  EXPECT_FALSE(asha.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{1, 2.0}}), 1, h1));
  const auto h2 = pruner_history_at(1, {3.0, 1.0});
  EXPECT_TRUE(asha.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{1, 2.0}}), 1, h2));
}

TEST(AshaPruner, NeverPrunesBetweenRungs) {
  const AshaPruner asha;
  const auto h = pruner_history_at(2, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6});
  // Step 2 is no rung (1, 3, 9): the worst value there still goes on.
  const Trial t = pruner_trial(kPrunerCurrent, TrialState::kRunning, {{1, 0.0}, {2, 100.0}});
  const auto d = asha.decide(t, 2, h);
  EXPECT_FALSE(d.prune);
  EXPECT_NE(d.reason.find("not a rung step"), std::string::npos) << d.reason;
}

TEST(AshaPruner, HigherRungComparesOnlyTrialsThatReachedIt) {
  const AshaPruner asha;
  // Nine trials reported at step 1, only three of them reached step 3 (the others were pruned).
  std::vector<Trial> h;
  for (int i = 0; i < 9; ++i) {
    std::map<std::int64_t, double> iv{{1, 10.0 + i}};
    if (i < 3) iv[3] = 5.0 + i;  // 5, 6, 7 at rung 1
    h.push_back(pruner_trial(i, i < 3 ? TrialState::kComplete : TrialState::kPruned, iv));
  }
  // n = 4 at rung 1 keeps floor(4 / 3) = 1: only a value <= 5 goes on.
  const Trial good = pruner_trial(kPrunerCurrent, TrialState::kRunning, {{1, 9.0}, {3, 4.0}});
  const Trial bad = pruner_trial(kPrunerCurrent, TrialState::kRunning, {{1, 9.0}, {3, 5.5}});
  EXPECT_FALSE(asha.should_prune(good, 3, h));
  EXPECT_TRUE(asha.should_prune(bad, 3, h));
}

TEST(AshaPruner, ReportsOffTheRungStepsAreJudgedAtEveryRungTheyPass) {
  const AshaPruner asha;  // rungs 1, 3, 9
  // Others report every 5 steps: their rung-1 and rung-3 values are both their step-5 value.
  std::vector<Trial> h;
  for (int i = 0; i < 5; ++i) h.push_back(pruner_trial(i, TrialState::kComplete, {{5, 1.0 + i}, {10, 0.5 + i}}));
  // n = 6 at each rung keeps 2. At step 5 this trial passes rungs 1 and 3 at once.
  EXPECT_FALSE(asha.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{5, 2.0}}), 5, h));
  EXPECT_TRUE(asha.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{5, 2.1}}), 5, h));
  // At step 10 it meets rung 9, where the others' values are 0.5, 1.5, ...; its step-5 report is not re-judged.
  const Trial t = pruner_trial(kPrunerCurrent, TrialState::kRunning, {{5, 2.0}, {10, 1.5}});
  EXPECT_FALSE(asha.should_prune(t, 10, h));
  const Trial worse = pruner_trial(kPrunerCurrent, TrialState::kRunning, {{5, 2.0}, {10, 1.6}});
  EXPECT_TRUE(asha.should_prune(worse, 10, h));
}

TEST(AshaPruner, NaNIsPrunedAndNeverCountsAndSelfIsExcluded) {
  const AshaPruner asha;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(asha.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{1, nan}}), 1, {}));
  // Others: 1, NaN, NaN: the NaNs do not count, so n = 2 and only the best goes on.
  const auto h = pruner_history_at(1, {1.0, nan, nan});
  EXPECT_TRUE(asha.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{1, 2.0}}), 1, h));
  // The trial itself in the history is not a competitor: alone, it goes on.
  const Trial self = pruner_trial(0, TrialState::kRunning, {{1, 3.0}});
  EXPECT_FALSE(asha.should_prune(self, 1, {self}));
}

TEST(AshaPruner, OptionsAreValidated) {
  AshaPrunerOptions o;
  o.reduction_factor = 1;
  try {
    AshaPruner{o};
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("sweep.asha.reduction_factor = 1"), std::string::npos) << e.what();
  }
  o = {};
  o.min_resource = 0;
  EXPECT_THROW(AshaPruner{o}, ConfigError);
}

// --- Median -------------------------------------------------------------------------------------

TEST(MedianPruner, WaitsForStartupTrials) {
  const MedianPruner median;  // 5 startup trials
  const Trial t = pruner_trial(kPrunerCurrent, TrialState::kRunning, {{10, 100.0}});
  const auto d = median.decide(t, 10, pruner_history_at(10, {1, 2, 3, 4}));
  EXPECT_FALSE(d.prune);
  EXPECT_NE(d.reason.find("4 of 5 startup trials"), std::string::npos) << d.reason;
  // Running and pruned trials are not startup trials.
  auto h = pruner_history_at(10, {1, 2, 3, 4});
  h.push_back(pruner_trial(4, TrialState::kPruned, {{10, 5.0}}));
  h.push_back(pruner_trial(5, TrialState::kRunning, {{10, 5.0}}));
  EXPECT_FALSE(median.should_prune(t, 10, h));
  EXPECT_TRUE(median.should_prune(t, 10, pruner_history_at(10, {1, 2, 3, 4, 5})));
}

TEST(MedianPruner, PrunesWhenTheBestValueSoFarIsWorseThanTheMedian) {
  const MedianPruner median;
  const auto h = pruner_history_at(10, {5, 1, 4, 2, 3});  // median 3
  auto at10 = [&](std::map<std::int64_t, double> iv) {
    return median.decide(pruner_trial(kPrunerCurrent, TrialState::kRunning, std::move(iv)), 10, h);
  };
  const auto d = at10({{10, 3.5}});
  EXPECT_TRUE(d.prune);
  EXPECT_NE(d.reason.find("best value 3.5 vs the median 3 of 5 trials at step 10"), std::string::npos) << d.reason;
  EXPECT_FALSE(at10({{10, 3.0}}).prune);             // equal is not worse
  EXPECT_FALSE(at10({{5, 2.0}, {10, 3.5}}).prune);   // the best so far (2.0) is what counts
}

TEST(MedianPruner, MedianInterpolatesAndUsesOnlyTrialsThatReportedAtTheStep) {
  const MedianPruner median;
  auto h = pruner_history_at(10, {1, 2, 3, 4});
  h.push_back(pruner_trial(4, TrialState::kComplete, {{20, 0.0}}));  // completed, but not at step 10
  // Median of 1, 2, 3, 4 is 2.5.
  EXPECT_TRUE(median.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{10, 2.6}}), 10, h));
  EXPECT_FALSE(median.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{10, 2.5}}), 10, h));
  // Nobody reported at step 15: no pruning.
  EXPECT_FALSE(median.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{15, 100.0}}), 15, h));
}

TEST(MedianPruner, WarmupAndIntervalAsOptuna) {
  MedianPrunerOptions o;
  o.n_warmup_steps = 10;
  o.interval_steps = 10;
  const MedianPruner median(o);
  std::vector<Trial> h;
  for (int i = 0; i < 5; ++i) h.push_back(pruner_trial(i, TrialState::kComplete, {{5, 1.0}, {10, 1.0}, {15, 1.0}, {20, 1.0}}));
  EXPECT_FALSE(median.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{5, 9.0}}), 5, h));  // warm-up
  // Step 10 is the first report in [10, 20): judged.
  EXPECT_TRUE(median.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{5, 9.0}, {10, 9.0}}), 10, h));
  // Step 15 follows a report at 10 in the same interval: not judged.
  const Trial t15 = pruner_trial(kPrunerCurrent, TrialState::kRunning, {{10, 9.0}, {15, 9.0}});
  EXPECT_FALSE(median.should_prune(t15, 15, h));
  // Step 15 after a report at 5 only is the first in [10, 20): judged.
  EXPECT_TRUE(median.should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{5, 9.0}, {15, 9.0}}), 15, h));
}

TEST(MedianPruner, PrunedTrialsJoinTheMedianOnlyWhenAsked) {
  auto h = pruner_history_at(10, {1, 1, 1, 1, 1});
  for (int i = 5; i < 11; ++i) h.push_back(pruner_trial(i, TrialState::kPruned, {{10, 9.0}}));
  const Trial t = pruner_trial(kPrunerCurrent, TrialState::kRunning, {{10, 2.0}});
  EXPECT_TRUE(MedianPruner().should_prune(t, 10, h));  // Optuna: median of the completed 1s
  MedianPrunerOptions o;
  o.include_pruned_trials = true;
  EXPECT_FALSE(MedianPruner(o).should_prune(t, 10, h));  // median of five 1s and six 9s is 9
}

TEST(MedianPruner, AllNaNIsPrunedAndOptionsAreValidated) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto h = pruner_history_at(10, {1, 2, 3, 4, 5});
  EXPECT_TRUE(MedianPruner().should_prune(pruner_trial(kPrunerCurrent, TrialState::kRunning, {{10, nan}}), 10, h));
  MedianPrunerOptions o;
  o.interval_steps = 0;
  EXPECT_THROW(MedianPruner{o}, ConfigError);
  EXPECT_EQ(MedianPruner().name(), "median");
  EXPECT_EQ(AshaPruner().name(), "asha");
}

}  // namespace
}  // namespace hwt::sweep
