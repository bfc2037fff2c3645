// metrics.jsonl, metrics.csv / eval.csv and the recorder, on a scripted sequence of records.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/obs/csv_sink.h"
#include "hwtrain/obs/jsonl_sink.h"
#include "hwtrain/obs/metrics_recorder.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

StepMetrics step(int64_t n, double loss) {
  StepMetrics m;
  m.step = n;
  m.loss = loss;
  m.lr = 1e-3 * n;
  m.tokens_per_second = 1000.0 + n;
  m.tokens_seen = 512 * n;
  return m;
}

EvalMetrics eval(int64_t n, double val_loss) {
  EvalMetrics e;
  e.step = n;
  e.val_loss = val_loss;
  e.val_perplexity = std::exp(val_loss);
  return e;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(JsonlSink, OneObjectPerLineWithType) {
  testing::TempDir dir;
  {
    JsonlSink sink(dir.path());
    sink.on_step(step(1, 4.5));
    sink.on_step(step(2, 4.25));
    sink.on_eval(eval(2, 4.0));
  }
  auto ls = lines(read_file(dir / "metrics.jsonl"));
  ASSERT_EQ(ls.size(), 3u);
  auto a = nlohmann::json::parse(ls[0]);
  EXPECT_EQ(a["type"], "step");
  EXPECT_EQ(a["step"], 1);
  EXPECT_EQ(a["loss"], 4.5);
  EXPECT_EQ(a["tokens_seen"], 512);
  EXPECT_TRUE(a["grad_norm"].is_null());      // unknown
  EXPECT_TRUE(a["skipped_steps"].is_null());  // unknown count
  auto c = nlohmann::json::parse(ls[2]);
  EXPECT_EQ(c["type"], "eval");
  EXPECT_EQ(c["val_loss"], 4.0);
  EXPECT_DOUBLE_EQ(c["val_perplexity"].get<double>(), std::exp(4.0));
}

TEST(JsonlSink, ReadBackRoundTripsAndRewindsOnResume) {
  testing::TempDir dir;
  {
    JsonlSink sink(dir.path());
    for (int i = 1; i <= 4; ++i) sink.on_step(step(i, 5.0 - i));
    sink.on_eval(eval(4, 1.5));
  }
  {
    // Resumed from a checkpoint at step 2: steps 3.. are logged again with other values.
    JsonlSink sink(dir.path(), /*append=*/true);
    sink.on_step(step(3, 0.5));
  }
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << "{\"type\":\"step\",\"step\":";  // cut
  MetricHistory h = read_metrics_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(h.steps.size(), 3u);
  EXPECT_EQ(h.steps[2].step, 3);
  EXPECT_EQ(h.steps[2].loss, 0.5);
  EXPECT_EQ(h.steps[1].lr, 2e-3);
  EXPECT_TRUE(std::isnan(h.steps[1].grad_norm));
  EXPECT_EQ(h.steps[1].tokens_seen, 1024);
  EXPECT_EQ(h.steps[1].skipped_steps, -1);
  EXPECT_TRUE(h.evals.empty());  // the eval at step 4 belonged to the abandoned steps
  EXPECT_EQ(h.num_bad_lines, 1);
}

TEST(CsvSink, HeaderAndRowsForStepsAndEvals) {
  testing::TempDir dir;
  {
    CsvSink sink(dir.path());
    sink.on_step(step(1, 4.5));
    sink.on_step(step(2, 0.1));
    sink.on_eval(eval(2, 4.0));
  }
  auto s = lines(read_file(dir / "metrics.csv"));
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].rfind("step,loss,lr,grad_norm,tokens_per_second,mfu,", 0), 0u) << s[0];
  EXPECT_EQ(s[1].rfind("1,4.5,0.001,,1001,,", 0), 0u) << s[1];
  EXPECT_EQ(s[2].rfind("2,0.1,0.002,,1002,,", 0), 0u) << s[2];
  // The last three columns: skipped_steps (unknown), tokens_seen, elapsed_seconds (unknown).
  EXPECT_EQ(s[2].substr(s[2].size() - 7), ",,1024,") << s[2];
  auto e = lines(read_file(dir / "eval.csv"));
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0], "step,val_loss,val_perplexity,elapsed_seconds");
  EXPECT_EQ(e[1].rfind("2,4,54.598150033144", 0), 0u) << e[1];
}

TEST(CsvSink, AppendKeepsOneHeader) {
  testing::TempDir dir;
  { CsvSink(dir.path()).on_step(step(1, 1.0)); }
  { CsvSink(dir.path(), /*append=*/true).on_step(step(2, 1.0)); }
  auto s = lines(read_file(dir / "metrics.csv"));
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2].rfind("2,", 0), 0u);
}

TEST(Sinks, UnwritableRunDirectoryThrowsIoErrorAtConstruction) {
  testing::TempDir dir;
  auto file = dir.write("file", "x");  // not a directory: nothing can be created beneath it
  EXPECT_THROW(JsonlSink(file / "run"), IoError);
  EXPECT_THROW(CsvSink(file / "run"), IoError);
  EXPECT_THROW(make_file_sinks(file / "run", ObsConfig{}), IoError);
}

TEST(MakeFileSinks, OpensWhatTheConfigEnables) {
  testing::TempDir dir;
  ObsConfig cfg;
  cfg.csv = false;
  auto sinks = make_file_sinks(dir / "run", cfg);
  EXPECT_EQ(sinks.size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(dir / "run" / "metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / "metrics.csv"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "run" / "tb"));
}

// Counts what reaches it, to see when the recorder flushes.
class CountingSink : public MetricSink {
 public:
  explicit CountingSink(int* flushes) : flushes_(flushes) {}
  void on_step(const StepMetrics&) override { ++num_steps; }
  void on_eval(const EvalMetrics&) override {}
  void flush() override { ++*flushes_; }
  int num_steps = 0;

 private:
  int* flushes_;
};

TEST(MetricsRecorder, FlushesOnScheduleAndOnDestruction) {
  double now = 100.0;
  int flushes = 0;
  {
    MetricsRecorder rec(10.0, [&] { return now; });
    rec.add_sink(std::make_unique<CountingSink>(&flushes));
    rec.on_step(step(1, 3.0));
    now = 105.0;
    rec.on_step(step(2, 3.0));
    EXPECT_EQ(flushes, 0);
    now = 110.5;
    rec.on_eval(eval(2, 3.0));
    EXPECT_EQ(flushes, 1);
    now = 115.0;
    rec.on_step(step(3, 3.0));
    EXPECT_EQ(flushes, 1);  // the clock restarted at the last flush
    EXPECT_EQ(rec.steps().size(), 3u);
    EXPECT_EQ(rec.evals().size(), 1u);
    EXPECT_EQ(rec.steps()[1].step, 2);
  }
  EXPECT_EQ(flushes, 2);
}

TEST(MetricsRecorder, FlushedDataIsOnDiskBeforeTheSinkCloses) {
  testing::TempDir dir;
  double now = 0.0;
  MetricsRecorder rec(1.0, [&] { return now; });
  rec.add_sinks(make_file_sinks(dir.path(), ObsConfig{}));
  rec.on_step(step(1, 3.0));
  now = 2.0;
  rec.on_step(step(2, 3.0));  // triggers the flush
  EXPECT_EQ(lines(read_file(dir / "metrics.jsonl")).size(), 2u);
  EXPECT_EQ(lines(read_file(dir / "metrics.csv")).size(), 3u);
}

}  // namespace
}  // namespace hwt
