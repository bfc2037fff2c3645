// Reading profiles back: self time of nested operators, kernels, memory peaks, phase sums, and the
// report of a run directory.
#include "hwtrain/obs/profile_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/chrome_trace.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

// A Kineto-shaped trace: thread 7 runs linear(0..100) > addmm(10..90) > mm(20..60), then a
// second addmm(100..150); thread 8 runs an mm(0..30); one GPU kernel; a profiler span with a
// string pid; two memory events.
const char* kKinetoTrace = R"trace({
  "schemaVersion": 1,
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 7, "ts": 1000.0, "dur": 100.0},
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 7, "ts": 1010.0, "dur": 80.0},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 7, "ts": 1020.0, "dur": 40.0},
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 7, "ts": 1100.0, "dur": 50.0},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 8, "ts": 1000.0, "dur": 30.0},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 7, "ts": 990.0, "dur": 500.0},
    {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 1030.0, "dur": 2000.0},
    {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0, "dur": 5000},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 7, "ts": 1001,
     "args": {"Total Reserved": 0, "Total Allocated": 4096, "Bytes": 4096, "Device Type": 0, "Device Id": -1}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 7, "ts": 1002,
     "args": {"Total Reserved": 0, "Total Allocated": 1024, "Bytes": -3072, "Device Type": 0, "Device Id": -1}}
  ]
})trace";

const OpStat& find(const std::vector<OpStat>& ops, const std::string& name) {
  for (const auto& op : ops) {
    if (op.name == name) return op;
  }
  throw std::runtime_error("no operator " + name);
}

TEST(TopOperators, SelfTimeExcludesNestedOperators) {
  auto ops = top_operators(kKinetoTrace);
  ASSERT_EQ(ops.size(), 4u);  // linear, addmm, mm on the CPU; one kernel
  const auto& linear = find(ops, "aten::linear");
  EXPECT_EQ(linear.calls, 1);
  EXPECT_DOUBLE_EQ(linear.total_ms, 0.1);
  EXPECT_DOUBLE_EQ(linear.self_ms, 0.02);
  const auto& addmm = find(ops, "aten::addmm");
  EXPECT_EQ(addmm.calls, 2);
  EXPECT_DOUBLE_EQ(addmm.total_ms, 0.13);
  EXPECT_DOUBLE_EQ(addmm.self_ms, 0.09);  // 80 - 40 + 50 us
  const auto& mm = find(ops, "aten::mm");
  EXPECT_EQ(mm.calls, 2);
  EXPECT_DOUBLE_EQ(mm.self_ms, 0.07);
  const auto& kernel = find(ops, "sm90_gemm");
  EXPECT_EQ(kernel.device, "gpu");
  EXPECT_DOUBLE_EQ(kernel.self_ms, 2.0);
  EXPECT_EQ(ops[0].name, "sm90_gemm");  // sorted by self time
  EXPECT_EQ(ops[1].name, "aten::addmm");
}

TEST(TopOperators, PeakMemoryAndBadInput) {
  auto peaks = peak_profiled_memory(kKinetoTrace);
  ASSERT_EQ(peaks.size(), 1u);
  EXPECT_EQ(peaks[0].first, "cpu");
  EXPECT_EQ(peaks[0].second, 4096.0);
  EXPECT_THROW(top_operators("{not json"), DataError);
  EXPECT_THROW(top_operators("{\"events\": []}"), DataError);
  EXPECT_TRUE(top_operators("[]").empty());
}

TEST(TopOperators, TableShowsTheTopN) {
  auto table = format_top_operators(top_operators(kKinetoTrace), 2);
  EXPECT_NE(table.find("sm90_gemm"), std::string::npos);
  EXPECT_NE(table.find("aten::addmm"), std::string::npos);
  EXPECT_EQ(table.find("aten::linear"), std::string::npos);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 3);  // header + 2 rows
}

TEST(TopOperators, LongNamesKeepTheirEnds) {
  OpStat op{"aten::_scaled_dot_product_flash_attention_for_cpu_backward_with_a_much_longer_tail", "cpu", 1, 1, 1};
  auto table = format_top_operators({op}, 5);
  EXPECT_NE(table.find("aten::_scaled"), std::string::npos) << table;
  EXPECT_NE(table.find("much_longer_tail"), std::string::npos) << table;
  EXPECT_NE(table.find("..."), std::string::npos) << table;
}

TEST(ProfileReport, SummarizesARunDirectory) {
  hwt::testing::TempDir dir;
  std::ostringstream none;
  EXPECT_THROW(run_profile_report(dir.path(), 5, none), IoError);
  ChromeTrace phases;
  for (int s = 0; s < 2; ++s) {
    phases.add_complete("step", "step", s, 1.0, 0, 1);
    phases.add_complete("forward", kPhaseCategory, s, 0.25, 0, 1);
    phases.add_complete("backward", kPhaseCategory, s + 0.25, 0.75, 0, 1);
  }
  phases.write(dir / kPhaseTraceFile);
  auto sums = phase_summary(phases.to_json());
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[0].name, "forward");
  EXPECT_DOUBLE_EQ(sums[1].total_ms, 1500.0);
  std::ostringstream phases_only;
  EXPECT_EQ(run_profile_report(dir.path(), 5, phases_only), 0);
  EXPECT_NE(phases_only.str().find("75.0%"), std::string::npos) << phases_only.str();
  EXPECT_NE(phases_only.str().find("no operator trace"), std::string::npos);
  dir.write(kOpsTraceFile, kKinetoTrace);
  std::ostringstream both;
  run_profile_report(dir.path(), 3, both);
  EXPECT_NE(both.str().find("top 3 of 4 operators"), std::string::npos) << both.str();
  EXPECT_NE(both.str().find("peak allocated on cpu"), std::string::npos) << both.str();
}

}  // namespace
}  // namespace hwt
