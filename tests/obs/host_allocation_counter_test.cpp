// The host allocation counter: CPU tensors are counted while they live, the peak remembers the
// largest moment until reset, and raw allocations (ideep's path) are counted and freed too.
#include "hwtrain/obs/host_allocation_counter.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <c10/core/CPUAllocator.h>

namespace hwt {
namespace {

TEST(HostAllocationCounter, CountsLiveTensorsAndTheirPeak) {
  ASSERT_TRUE(install_host_allocation_counter());
  ASSERT_TRUE(install_host_allocation_counter());  // idempotent
  EXPECT_TRUE(host_allocation_counter_installed());
  reset_host_allocation_peak();
  const HostAllocation start = host_allocation();
  EXPECT_EQ(start.peak_bytes, start.current_bytes);
  {
    auto a = torch::empty({1024, 1024}, torch::kFloat);  // 4 MiB
    EXPECT_EQ(host_allocation().current_bytes - start.current_bytes, 4 << 20);
    {
      auto b = torch::ones({256, 1024}, torch::kDouble);  // 2 MiB
      EXPECT_EQ(host_allocation().current_bytes - start.current_bytes, 6 << 20);
    }
    EXPECT_EQ(host_allocation().current_bytes - start.current_bytes, 4 << 20);
    EXPECT_EQ(host_allocation().peak_bytes - start.current_bytes, 6 << 20);
    EXPECT_FLOAT_EQ(a.fill_(2).sum().item<float>(), 2.0f * 1024 * 1024);  // usable memory
  }
  EXPECT_EQ(host_allocation().current_bytes, start.current_bytes);
  reset_host_allocation_peak();
  EXPECT_EQ(host_allocation().peak_bytes, start.current_bytes);
}

TEST(HostAllocationCounter, RawAllocationsAreCountedAndFreed) {
  ASSERT_TRUE(install_host_allocation_counter());
  c10::Allocator* allocator = c10::GetCPUAllocator();
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  const int64_t before = host_allocation().current_bytes;
  void* p = allocator->raw_allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % c10::gAlignment, 0u);
  EXPECT_EQ(host_allocation().current_bytes - before, 1000);
  allocator->raw_deallocate(p);
  EXPECT_EQ(host_allocation().current_bytes, before);
}

}  // namespace
}  // namespace hwt
