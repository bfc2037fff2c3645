// report.html from a scripted history and from a run directory; the SVG plot helper.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/obs/jsonl_sink.h"
#include "hwtrain/obs/metrics_recorder.h"
#include "hwtrain/obs/report.h"
#include "hwtrain/obs/svg_plot.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

ReportInputs scripted_inputs() {
  ReportInputs in;
  in.title = "scripted";
  in.hardware_summary = "CPU: 2 cores, AVX-512 <bf16>";
  in.plan = {{"precision", "bf16", "AVX512_BF16 present: 3.4x fp32 GEMM"},
             {"micro_batch", "12", "fits in 80% of memory"}};
  in.config_text = "[train]\nmax_steps = 40\n";
  for (int i = 1; i <= 40; ++i) {
    StepMetrics m;
    m.step = i;
    m.loss = 5.0 * std::exp(-i / 20.0);
    m.lr = 1e-3;
    m.tokens_per_second = 6000 + 10 * i;
    m.mfu = 0.4;
    m.step_seconds = 0.2;
    m.forward_seconds = 0.06;
    m.backward_seconds = 0.12;
    m.rss_bytes = 1.5e9;
    m.tokens_seen = 3072 * i;
    m.skipped_steps = 0;
    m.elapsed_seconds = 0.2 * i;
    in.steps.push_back(m);
    if (i % 10 == 0) {
      EvalMetrics e;
      e.step = i;
      e.val_loss = m.loss + 0.1;
      e.val_perplexity = std::exp(e.val_loss);
      in.evals.push_back(e);
    }
  }
  return in;
}

TEST(Report, ScriptedHistory) {
  testing::TempDir dir;
  write_report(dir.path(), scripted_inputs());
  std::string html = read_file(dir / "report.html");
  // Loss, learning rate, throughput, MFU, memory, step time (no monitor samples: no 7th plot).
  EXPECT_EQ(count(html, "<svg class=\"plot\""), 6u);
  EXPECT_EQ(count(html, "no data recorded"), 0u);
  EXPECT_NE(html.find("validation loss"), std::string::npos);
  EXPECT_NE(html.find("AVX512_BF16 present: 3.4x fp32 GEMM"), std::string::npos);
  EXPECT_NE(html.find("fits in 80% of memory"), std::string::npos);
  EXPECT_NE(html.find("max_steps = 40"), std::string::npos);
  EXPECT_NE(html.find("AVX-512 &lt;bf16&gt;"), std::string::npos);  // escaped
  EXPECT_NE(html.find("122880"), std::string::npos);  // tokens seen at the end
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // nothing fetched
}

TEST(Report, EmptyMetricsStillDrawTheRequiredPlots) {
  ReportInputs in;
  std::string html = render_report_html(in);
  // Loss, throughput, MFU, memory are always there; each says it has no data.
  EXPECT_EQ(count(html, "<svg class=\"plot\""), 4u);
  EXPECT_EQ(count(html, "no data recorded"), 4u);
  EXPECT_GE(count(html, "not recorded"), 3u);  // hardware, plan, config
}

TEST(Report, FromRunDirectory) {
  testing::TempDir dir;
  ReportInputs src = scripted_inputs();
  {
    JsonlSink sink(dir.path());
    for (const auto& m : src.steps) sink.on_step(m);
    for (const auto& e : src.evals) sink.on_eval(e);
  }
  write_plan_json(dir / "plan.json", src.plan);
  dir.write("config.toml", src.config_text);
  auto path = write_report_from_run_dir(dir.path());
  std::string html = read_file(path);
  EXPECT_EQ(count(html, "<svg class=\"plot\""), 6u);
  EXPECT_NE(html.find("AVX512_BF16 present"), std::string::npos);
  EXPECT_NE(html.find("max_steps = 40"), std::string::npos);
  EXPECT_NE(html.find("not recorded"), std::string::npos);  // no hardware.txt
}

TEST(Report, DirectoryWithoutMetricsIsADataError) {
  testing::TempDir dir;
  try {
    write_report_from_run_dir(dir.path());
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no metrics.jsonl in " + dir.path().string()),
              std::string::npos)
        << e.what();
  }
}

TEST(Report, PlanJsonRoundTripAndBadFile) {
  testing::TempDir dir;
  std::vector<PlanRow> rows = {{"threads", "2", "physical cores"}};
  write_plan_json(dir / "plan.json", rows);
  auto back = read_plan_json(dir / "plan.json");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].reason, "physical cores");
  EXPECT_THROW(read_plan_json(dir.write("bad.json", "{\"x\": 1}")), DataError);
}

TEST(SvgPlot, NiceTicksAndLabels) {
  auto t = nice_ticks(0.0, 1.0, 5);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_DOUBLE_EQ(t[1], 0.2);
  t = nice_ticks(3.2, 47.0, 5);
  EXPECT_DOUBLE_EQ(t.front(), 10.0);
  EXPECT_DOUBLE_EQ(t.back(), 40.0);
  EXPECT_EQ(format_tick(0.0003), "3e-4");
  EXPECT_EQ(format_tick(1.5e6), "1.5M");
  EXPECT_EQ(format_tick(250), "250");
}

TEST(SvgPlot, NanBreaksTheLineAndLongSeriesAreReduced) {
  PlotSpec spec;
  spec.title = "t";
  PlotSeries s;
  s.x = {1, 2, 3, 4, 5};
  s.y = {1, 2, NAN, 4, 5};
  spec.series.push_back(s);
  std::string svg = svg_line_plot(spec);
  EXPECT_EQ(count(svg, " M"), 2u);  // two runs of the line
  PlotSeries big;
  for (int i = 0; i < 100000; ++i) {
    big.x.push_back(i);
    big.y.push_back(i == 5000 ? 100.0 : 1.0);
  }
  spec.series = {big};
  svg = svg_line_plot(spec);
  EXPECT_LT(svg.size(), 60000u);
  EXPECT_NE(svg.find(">100<"), std::string::npos);  // the spike still sets the axis
}

// Writes a sample run directory (all file sinks, monitor samples, plan, config, hardware) and
// its report for scripts/check-report.sh; runs only when HWTRAIN_REPORT_SAMPLE_DIR is set.
TEST(Report, SampleRunDirectoryForBrowserCheck) {
  const char* out = std::getenv("HWTRAIN_REPORT_SAMPLE_DIR");
  if (!out) GTEST_SKIP() << "set HWTRAIN_REPORT_SAMPLE_DIR to write a sample run directory";
  const std::filesystem::path dir = out;
  std::filesystem::create_directories(dir);
  ReportInputs src = scripted_inputs();
  {
    MetricsRecorder sink(ObsConfig{});
    sink.add_sinks(make_file_sinks(dir, ObsConfig{}));
    for (auto m : src.steps) {
      m.device_allocated_bytes = 2.0e9 + 1e7 * m.step;
      m.device_reserved_bytes = 3.0e9;
      m.device_peak_bytes = 2.6e9;
      m.data_wait_seconds = 0.01;
      m.optimizer_seconds = 0.01;
      sink.on_step(m);
      if (m.step % 5 == 0) {
        MonitorSample s;
        s.step = m.step;
        s.process_cpu_percent = 180 + m.step % 7;
        s.gpus.push_back(GpuSample{0, 85.0 + m.step % 5, 3e9, 8e10, 60, 300});
        sink.on_monitor(s);
      }
    }
    for (const auto& e : src.evals) sink.on_eval(e);
  }
  write_plan_json(dir / "plan.json", src.plan);
  write_file_atomic(dir / "config.toml", src.config_text);
  write_file_atomic(dir / "hardware.txt", src.hardware_summary + "\nGPU 0: H100 80 GiB\n");
  std::string html = read_file(write_report_from_run_dir(dir));
  EXPECT_EQ(count(html, "<svg class=\"plot\""), 7u);
}

}  // namespace
}  // namespace hwt
