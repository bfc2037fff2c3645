// Progress lines carry the parseable tokens; the bar redraws in place; eval lines stand alone.
#include <gtest/gtest.h>

#include <regex>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/progress.h"

namespace hwt {
namespace {

StepMetrics step(int64_t n) {
  StepMetrics m;
  m.step = n;
  m.loss = 3.25;
  m.lr = 3e-4;
  m.tokens_per_second = 6340;
  m.mfu = 0.412;
  m.rss_bytes = 1.5 * 1024 * 1024 * 1024;
  m.elapsed_seconds = 2.0 * n;
  return m;
}

TEST(Progress, LineModeIsParseable) {
  std::vector<std::string> lines, raw;
  {
    ProgressOutput out;
    out.line = [&](const std::string& s) { lines.push_back(s); };
    out.raw = [&](const std::string& s) { raw.push_back(s); };
    ProgressDisplay p(ProgressMode::lines, 100, out);
    p.on_step(step(10));
    p.on_step(step(20));
    EvalMetrics e;
    e.step = 20;
    e.val_loss = 3.5;
    e.val_perplexity = 33.12;
    p.on_eval(e);
  }
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(raw.empty());
  std::smatch m;
  std::regex re(R"(^step (\d+) \| loss ([0-9.]+) \| lr ([0-9.e+-]+) \| .*tokens/s (\d+) \| )"
                R"(mfu ([0-9.]+)% \| mem ([^|]+) \|.*eta (\S+)$)");
  ASSERT_TRUE(std::regex_search(lines[1], m, re)) << lines[1];
  EXPECT_EQ(m[1], "20");
  EXPECT_EQ(std::stod(m[2]), 3.25);
  EXPECT_EQ(std::stod(m[3]), 3e-4);
  EXPECT_EQ(m[4], "6340");
  EXPECT_EQ(m[5], "41.2");
  EXPECT_EQ(m[6], "1.5 GiB");
  EXPECT_EQ(m[7], "2m40s");  // 2 s per step, 80 steps left
  EXPECT_EQ(lines[0].find("eta"), std::string::npos);  // no rate known after one step
  EXPECT_TRUE(std::regex_search(lines[2], std::regex(R"(^eval step 20 \| val_loss 3\.5000 \| )")))
      << lines[2];
}

TEST(Progress, UnknownRequiredValuesStillAppear) {
  StepMetrics m;
  m.step = 3;
  std::string s = format_step_line(m, -1);
  EXPECT_EQ(s, "step 3 | loss nan | lr nan | tokens/s nan");
}

TEST(Progress, BarModeRedrawsOneLineAndPrintsEvalsOnTheirOwn) {
  std::vector<std::string> lines;
  std::string raw;
  {
    ProgressOutput out;
    out.line = [&](const std::string& s) { lines.push_back(s); };
    out.raw = [&](const std::string& s) { raw += s; };
    out.terminal_columns = 60;
    out.min_redraw_seconds = 0;
    ProgressDisplay p(ProgressMode::bar, 100, out);
    p.on_step(step(50));
    p.on_step(step(51));
    EvalMetrics e;
    e.step = 51;
    e.val_loss = 3.0;
    p.on_eval(e);
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("val_loss 3.0000"), std::string::npos);
  EXPECT_NE(raw.find("\r[##########..........] 50/100 50%"), std::string::npos) << raw;
  EXPECT_EQ(raw.find('\n'), raw.size() - 1);  // one newline, at finish()
  // No redrawn line is wider than the terminal (less one column, so it never wraps).
  size_t start = 0;
  while ((start = raw.find('\r', start)) != std::string::npos) {
    size_t end = raw.find("\033[K", start);
    EXPECT_LE(end - start - 1, 59u);
    start = end;
  }
}

TEST(Progress, ModeFromConfig) {
  EXPECT_EQ(resolve_progress_mode(std::nullopt, true), ProgressMode::bar);
  EXPECT_EQ(resolve_progress_mode(std::nullopt, false), ProgressMode::lines);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::lines, true), ProgressMode::lines);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::bar, false), ProgressMode::bar);
}

TEST(Progress, Durations) {
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(725), "12m05s");
  EXPECT_EQ(format_duration(3 * 3600 + 125), "3h02m");
  EXPECT_EQ(format_duration(NAN), "?");
}

}  // namespace
}  // namespace hwt
