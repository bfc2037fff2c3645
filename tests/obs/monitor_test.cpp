// The hardware monitor thread: off at interval 0, samples and stops promptly otherwise.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "hwtrain/obs/monitor.h"
#include "hwtrain/obs/nvml.h"

namespace hwt {
namespace {

TEST(HardwareMonitor, IntervalZeroStartsNoThread) {
  HardwareMonitor m(0.0);
  EXPECT_FALSE(m.running());
  EXPECT_FALSE(m.latest().has_value());
  EXPECT_FALSE(m.poll_new().has_value());
}

TEST(HardwareMonitor, SamplesProcessAndStops) {
  // A long interval: the destructor must wake the thread rather than wait an hour.
  HardwareMonitor m(3600.0, /*use_nvml=*/false);
  EXPECT_TRUE(m.running());
  m.set_step(42);
  for (int i = 0; i < 500 && m.num_samples() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(m.num_samples(), 1u);
  auto s = m.latest();
  ASSERT_TRUE(s.has_value());
  EXPECT_GT(s->rss_bytes, 1e6);
  EXPECT_TRUE(s->gpus.empty());
  EXPECT_TRUE(m.poll_new().has_value());
  EXPECT_FALSE(m.poll_new().has_value());  // each sample is handed out once
}

TEST(HardwareMonitor, ShortIntervalKeepsSampling) {
  HardwareMonitor m(0.01, /*use_nvml=*/false);
  for (int i = 0; i < 500 && m.num_samples() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(m.num_samples(), 3u);
  auto s = m.latest();
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(std::isnan(s->process_cpu_percent));  // not the first sample: a rate is known
}

TEST(ProcessStats, RssAndCpuTime) {
  EXPECT_GT(process_rss_bytes(), 1e6);
  double cpu = process_cpu_seconds();
  EXPECT_GE(cpu, 0.0);
  volatile double x = 0;
  for (int i = 0; i < 20000000; ++i) x = x + 1e-9 * i;
  EXPECT_GT(process_cpu_seconds(), cpu);
}

TEST(Nvml, AbsentOrConsistent) {
  Nvml nvml;
  if (!nvml.available()) GTEST_SKIP() << "libnvidia-ml.so.1 not present";
  auto gpus = nvml.sample();
  EXPECT_EQ(static_cast<int>(gpus.size()), nvml.num_gpus());
  for (const auto& g : gpus) EXPECT_GT(g.memory_total_bytes, 0);
}

}  // namespace
}  // namespace hwt
