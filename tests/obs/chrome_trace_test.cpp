// ChromeTrace: valid JSON in the Trace Event format, events ordered by time, microseconds.
#include "hwtrain/obs/chrome_trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "hwtrain/core/files.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using json = nlohmann::json;

TEST(ChromeTrace, WritesValidJsonOrderedByTimeInMicroseconds) {
  ChromeTrace trace;
  trace.set_process_name(0, "hwtrain");
  trace.set_thread_name(0, 1, "loop");
  // Added out of order; a child that starts with its parent is added before it.
  trace.add_complete("late", "phase", 2.0, 0.5, 0, 1);
  trace.add_complete("child", "phase", 1.0, 0.25, 0, 1, {{"step", 3}});
  trace.add_complete("parent", "step", 1.0, 1.0, 0, 1);
  trace.add_counter("loss", 1.5, {{"loss", 2.25}});
  trace.add_instant("eval", "mark", 0.5, 0, 1);
  const json j = json::parse(trace.to_json());
  ASSERT_TRUE(j.contains("traceEvents"));
  EXPECT_EQ(j.at("displayTimeUnit"), "ms");
  const json& ev = j.at("traceEvents");
  ASSERT_EQ(ev.size(), 7u);
  EXPECT_EQ(ev[0].at("ph"), "M");
  EXPECT_EQ(ev[0].at("args").at("name"), "hwtrain");
  EXPECT_EQ(ev[1].at("name"), "thread_name");
  std::vector<std::string> order;
  double last_ts = -1;
  for (size_t i = 2; i < ev.size(); ++i) {
    order.push_back(ev[i].at("name").get<std::string>());
    EXPECT_GE(ev[i].at("ts").get<double>(), last_ts);
    last_ts = ev[i].at("ts").get<double>();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"eval", "parent", "child", "loss", "late"}));
  const json& parent = ev[3];
  EXPECT_EQ(parent.at("ph"), "X");
  EXPECT_EQ(parent.at("cat"), "step");
  EXPECT_DOUBLE_EQ(parent.at("ts").get<double>(), 1.0e6);
  EXPECT_DOUBLE_EQ(parent.at("dur").get<double>(), 1.0e6);
  EXPECT_DOUBLE_EQ(ev[4].at("dur").get<double>(), 250000.0);
  EXPECT_EQ(ev[4].at("args").at("step"), 3);
  EXPECT_EQ(ev[5].at("ph"), "C");
  EXPECT_EQ(ev[5].at("args").at("loss"), 2.25);
  EXPECT_EQ(ev[2].at("ph"), "i");
  EXPECT_EQ(ev[2].at("s"), "t");
  EXPECT_FALSE(ev[2].contains("dur"));
}

TEST(ChromeTrace, DropsUnknownTimesAndClampsNegativeDurations) {
  ChromeTrace trace;
  trace.add_complete("nan start", "x", NAN, 1.0, 0, 0);
  trace.add_complete("nan dur", "x", 1.0, NAN, 0, 0);
  trace.add_complete("negative", "x", 1.0, -0.5, 0, 0);
  trace.add_counter("all unknown", 1.0, {{"a", NAN}});
  trace.add_counter("some unknown", 1.0, {{"a", NAN}, {"b", 2.0}});
  trace.add_complete("nan arg", "x", 2.0, 1.0, 0, 0, {{"loss", NAN}, {"lr", 0.5}});
  EXPECT_EQ(trace.num_events(), 3u);
  const json ev = json::parse(trace.to_json()).at("traceEvents");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].at("name"), "negative");
  EXPECT_EQ(ev[0].at("dur"), 0.0);
  EXPECT_FALSE(ev[1].at("args").contains("a"));
  EXPECT_EQ(ev[1].at("args").at("b"), 2.0);
  EXPECT_FALSE(ev[2].at("args").contains("loss"));  // NaN is not valid JSON
}

TEST(ChromeTrace, EscapesNamesAndRoundsToNanoseconds) {
  ChromeTrace trace;
  trace.add_complete("say \"hi\"\n\\", "x", 1.23456789e-3, 1e-9 / 3, 0, 0);
  const std::string text = trace.to_json();
  const json ev = json::parse(text).at("traceEvents");
  EXPECT_EQ(ev[0].at("name"), "say \"hi\"\n\\");
  EXPECT_DOUBLE_EQ(ev[0].at("ts").get<double>(), 1234.568);
  EXPECT_DOUBLE_EQ(ev[0].at("dur").get<double>(), 0.0);
}

TEST(ChromeTrace, EmptyTraceIsValidAndWriteIsAtomic) {
  hwt::testing::TempDir dir;
  ChromeTrace trace;
  EXPECT_EQ(json::parse(trace.to_json()).at("traceEvents").size(), 0u);
  trace.add_complete("a", "x", 0, 1, 0, 0);
  trace.write(dir / "trace.json");
  EXPECT_EQ(json::parse(read_file(dir / "trace.json")).at("traceEvents").size(), 1u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);  // no temp left
}

}  // namespace
}  // namespace hwt
