// The LR range test (train/lr_range_test.h): the exponential ramp it steers through the LR scale,
// its stop on divergence, and the suggestion read from a curve whose answer is known.
#include "hwtrain/train/lr_range_test.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hwtrain/core/error.h"
#include "train/fake_control.h"

namespace hwt {
namespace {

using testing::FakeTrainerControl;
using testing::step_record;

TEST(LrRangeTest, RampsExponentiallyThroughTheScaleAndStopsAtTheEnd) {
  LrRangeTestOptions o;
  o.start_lr = 1e-6;
  o.end_lr = 1e-1;
  o.steps = 16;  // a decade every three steps
  FakeTrainerControl t;
  t.run_options.train.lr = 1e-3;  // the base the scale multiplies
  LrRangeTest test(o);
  test.on_train_begin(t);
  EXPECT_NEAR(t.scale * 1e-3, 1e-6, 1e-18);
  for (int64_t s = 1; s <= 16; ++s) {
    test.on_step_end(t, step_record(s, 5.0 - 0.1 * s));
    if (s < 16) {
      EXPECT_NEAR(t.scale * 1e-3 / range_test_lr(o, s), 1.0, 1e-12) << s;
    }
  }
  EXPECT_NEAR(test.points()[3].lr, 1e-5, 1e-17);
  EXPECT_NEAR(test.points().back().lr, 1e-1, 1e-13);
  EXPECT_TRUE(t.stop_requested());
  EXPECT_FALSE(test.diverged());
  EXPECT_NE(t.stop_reason.find("reached --end-lr"), std::string::npos) << t.stop_reason;
}

TEST(LrRangeTest, StopsOnceTheSmoothedLossDiverges) {
  LrRangeTestOptions o;
  o.steps = 100;
  FakeTrainerControl t;
  t.run_options.train.lr = 1.0;
  LrRangeTest test(o);
  test.on_train_begin(t);
  int64_t s = 1;
  for (; s <= 20; ++s) test.on_step_end(t, step_record(s, 4.0));
  EXPECT_FALSE(t.stop_requested());
  for (; s <= 100 && !t.stop_requested(); ++s) test.on_step_end(t, step_record(s, 1000.0));
  EXPECT_TRUE(test.diverged());
  EXPECT_LT(s, 40) << "the smoothed loss passes 4x its best within a few steps of 1000s";
  EXPECT_NE(t.stop_reason.find("diverged"), std::string::npos) << t.stop_reason;
  // A non-finite loss is divergence too.
  LrRangeTest nan_test(o);
  FakeTrainerControl t2;
  nan_test.on_train_begin(t2);
  nan_test.on_step_end(t2, step_record(1, NAN));
  EXPECT_TRUE(nan_test.diverged());
}

// loss(x = log10 lr) falls fastest at x = -3, then rises from x = -1: the steepest point is 1e-3,
// the minimum near 1e-1, so a tenth of it is near 1e-2 (read up to a third of a decade early: the
// centred average of a curve that rises faster than it fell, see centred_loss()).
TEST(LrRangeTest, SuggestsTheSteepestDescentAndATenthOfTheMinimum) {
  std::vector<LrRangePoint> points;
  for (int i = 0; i < 100; ++i) {
    const double x = -7.0 + 8.0 * i / 99.0;
    const double loss = 3.0 - 2.0 / (1.0 + std::exp(-2.0 * (x + 3.0))) + 5.0 * std::pow(std::max(0.0, x + 1.0), 2);
    points.push_back({std::pow(10.0, x), loss, loss});
  }
  const auto s = suggest_lr(points);
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(std::log10(s->steepest), -3.0, 0.1);
  EXPECT_NEAR(std::log10(s->min_loss_tenth), -2.0, 0.34);
  points.resize(10);
  EXPECT_FALSE(suggest_lr(points).has_value()) << "too few points";
}

TEST(LrRangeTest, BadOptionsNameTheFlag) {
  LrRangeTestOptions o;
  o.end_lr = o.start_lr;
  try {
    LrRangeTest test(o);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--end-lr"), std::string::npos) << e.what();
  }
  o = {};
  o.start_lr = 0;
  EXPECT_THROW(LrRangeTest{o}, ConfigError);
  o = {};
  o.steps = 15;  // suggest_lr needs 16 points: fewer could never suggest
  try {
    LrRangeTest{o};
    FAIL() << "--steps 15 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--steps"), std::string::npos) << e.what();
  }
  o.steps = kMinLrRangePoints;
  EXPECT_NO_THROW(LrRangeTest{o});
}

}  // namespace
}  // namespace hwt
