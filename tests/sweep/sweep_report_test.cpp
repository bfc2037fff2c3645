// The sweep report (sweep/sweep_report.h) and the importance measure it shows
// (sweep/param_importance.h).
#include "hwtrain/sweep/sweep_report.h"

#include <gtest/gtest.h>

#include "hwtrain/sweep/param_importance.h"

namespace hwt::sweep {
namespace {

SearchSpace report_space() {
  SearchSpace s;
  ParamSpec lr;
  lr.key = "train.lr";
  lr.kind = ParamKind::kLogUniform;
  lr.low = 1e-4;
  lr.high = 1e-1;
  ParamSpec noise;
  noise.key = "train.seed";
  noise.kind = ParamKind::kInt;
  noise.low = 0;
  noise.high = 1000;
  ParamSpec dtype;
  dtype.key = "optimization.mixed_precision_dtype";
  dtype.kind = ParamKind::kChoice;
  dtype.choices = {"bf16", "fp32"};
  s.params = {lr, noise, dtype};
  return s;
}

// The objective falls with lr, does not depend on the seed, and is 0.5 higher under fp32; lr and the
// dtype vary independently.
std::vector<Trial> report_trials() {
  std::vector<Trial> out;
  for (int i = 0; i < 20; ++i) {
    Trial t;
    t.number = i;
    t.state = TrialState::kComplete;
    const double lr = 1e-4 * std::pow(10.0, 3.0 * (i % 10) / 9.0);  // ten levels, each under both dtypes
    const bool fp32 = i >= 10;
    t.params = {{"train.lr", lr},
                {"train.seed", std::int64_t{(i * 389) % 1000}},
                {"optimization.mixed_precision_dtype", std::string(fp32 ? "fp32" : "bf16")}};
    t.value = 3.0 - 0.2 * std::log10(lr) + (fp32 ? 0.5 : 0.0);
    out.push_back(t);
  }
  Trial failed;
  failed.number = 20;
  failed.state = TrialState::kFailed;
  failed.reason = "out of memory <b>";
  out.push_back(failed);
  return out;
}

TEST(ParamImportance, RanksTheParametersThatMatterAboveTheOneThatDoesNot) {
  const auto imp = param_importance(report_space(), report_trials());
  ASSERT_EQ(imp.size(), 3u);
  EXPECT_EQ(imp.back().key, "train.seed");
  EXPECT_LT(imp.back().value, 0.1);
  for (const auto& i : imp) {
    if (i.key == "train.lr") {
      EXPECT_EQ(i.measure, "rho^2");
      EXPECT_GT(i.value, 0.25);  // 0.33: the lr levels explain a third of the spread, the dtype the rest
    }
    if (i.key == "optimization.mixed_precision_dtype") {
      EXPECT_EQ(i.measure, "eta^2");
      EXPECT_GT(i.value, 0.5);  // 0.63
    }
  }
  double shares = 0;
  for (const auto& i : imp) shares += i.share;
  EXPECT_NEAR(shares, 1.0, 1e-12);
  const std::vector<Trial> all = report_trials();
  const std::vector<Trial> two(all.begin(), all.begin() + 2);
  EXPECT_TRUE(param_importance(report_space(), two).empty()) << "fewer than 3 completed trials";
}

TEST(SweepReport, ShowsHistorySlicesImportanceAndTheBestTrial) {
  SweepReportInputs in{"study <1>.db", "val_loss", Direction::kMin, report_space(), report_trials(), "trial  state\n"};
  const std::string html = render_sweep_report(in);
  EXPECT_NE(html.find("Optimization history"), std::string::npos);
  for (const char* key : {"Slice: train.lr", "Slice: train.seed", "Slice: optimization.mixed_precision_dtype"}) {
    EXPECT_NE(html.find(key), std::string::npos) << key;
  }
  EXPECT_NE(html.find("rho^2"), std::string::npos);
  EXPECT_NE(html.find("20 complete, 0 pruned, 1 failed"), std::string::npos);
  EXPECT_NE(html.find("study &lt;1&gt;.db"), std::string::npos) << "escaped";
  EXPECT_EQ(html.find("<1>"), std::string::npos);
  size_t circles = 0;
  for (size_t at = html.find("<circle"); at != std::string::npos; at = html.find("<circle", at + 1)) ++circles;
  EXPECT_GE(circles, 20u * 4) << "a point per completed trial in the history and each slice";
  in.direction = Direction::kMax;  // values are stored negated: the report shows them as the user's
  EXPECT_NE(render_sweep_report(in).find("val_loss = -"), std::string::npos);
}

}  // namespace
}  // namespace hwt::sweep
