#include "hwtrain/sweep/metrics_tail.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "support/temp_dir.h"

namespace hwt::sweep {
namespace {

using hwt::testing::TempDir;

void tail_append(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::app) << text;
}

TEST(MetricsTail, ReadsOnlyCompleteLinesAndKeepsAPartialOneForLater) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  MetricsTail tail(path, "val_loss");
  EXPECT_TRUE(tail.read_new().empty());  // no file yet
  tail_append(path, "{\"type\":\"step\",\"step\":1,\"loss\":3.0}\n{\"type\":\"eval\",\"step\":1,\"val_loss\":2.5}\n{\"type\":\"ev");
  auto points = tail.read_new();
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].step, 1);
  EXPECT_DOUBLE_EQ(points[0].value, 2.5);
  EXPECT_TRUE(tail.read_new().empty());
  tail_append(path, "al\",\"step\":2,\"val_loss\":2.0}\n");
  points = tail.read_new();
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].step, 2);
  EXPECT_EQ(tail.num_bad_lines(), 0);
}

TEST(MetricsTail, SkipsAndCountsMalformedLinesAndReadsNullAsNan) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  MetricsTail tail(path, "val_loss");
  tail_append(path,
              "not json\n{\"type\":\"eval\",\"val_loss\":1}\n{\"type\":\"monitor\",\"step\":3}\n\n"
              "{\"type\":\"eval\",\"step\":3,\"val_loss\":\"x\"}\n{\"type\":\"eval\",\"step\":4,\"val_loss\":null}\n");
  const auto points = tail.read_new();
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].step, 4);
  EXPECT_TRUE(std::isnan(points[0].value));
  EXPECT_EQ(tail.num_bad_lines(), 3);
}

TEST(MetricsTail, StepMetricsAndARewrittenFile) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  MetricsTail tail(path, "loss");
  tail_append(path, "{\"type\":\"step\",\"step\":1,\"loss\":3.0}\n{\"type\":\"step\",\"step\":2,\"loss\":2.0}\n");
  EXPECT_EQ(tail.read_new().size(), 2u);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "{\"type\":\"step\",\"step\":1,\"loss\":9}\n";
  const auto points = tail.read_new();
  ASSERT_EQ(points.size(), 1u);
  EXPECT_DOUBLE_EQ(points[0].value, 9.0);
}

}  // namespace
}  // namespace hwt::sweep
