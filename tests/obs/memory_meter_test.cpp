// The memory meter: the process's peak resident set follows a large allocation, and a reset
// brings it back down after the memory is returned.
#include "hwtrain/obs/memory_meter.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "hwtrain/obs/monitor.h"

namespace hwt {
namespace {

TEST(MemoryMeter, PeakResidentSetSeesAnAllocationAndResets) {
  if (!reset_process_peak_rss()) GTEST_SKIP() << "this kernel refuses /proc/self/clear_refs";
  const double before = process_peak_rss_bytes();
  ASSERT_GT(before, 0);
  constexpr size_t kBytes = 256u << 20;
  {
    std::unique_ptr<char[]> block(new char[kBytes]);
    std::memset(block.get(), 1, kBytes);  // touch every page
    EXPECT_GE(process_peak_rss_bytes(), before + 0.9 * kBytes);
  }
  release_free_host_memory();
  ASSERT_TRUE(reset_process_peak_rss());
  EXPECT_LT(process_peak_rss_bytes(), before + 0.5 * kBytes);
}

TEST(MemoryMeter, NoCudaDeviceIsUnknown) {
  if (torch::cuda::is_available()) GTEST_SKIP();
  EXPECT_TRUE(std::isnan(device_memory(0).allocated_bytes));
}

}  // namespace
}  // namespace hwt
