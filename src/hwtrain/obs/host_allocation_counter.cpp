#include "hwtrain/obs/host_allocation_counter.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <cstring>

namespace hwt {
namespace {

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};

// Each block carries its size in a header of one alignment unit, so that the context of the
// DataPtr is the data pointer itself: raw_allocate()/raw_deleter() (used by ideep) keep working.
constexpr size_t kHeader = c10::gAlignment;

void count(int64_t delta) {
  const int64_t now = g_current.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void counted_free(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeader;
  size_t bytes = 0;
  std::memcpy(&bytes, block, sizeof(bytes));
  count(-static_cast<int64_t>(bytes));
  c10::free_cpu(block);
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return {nullptr, nullptr, &counted_free, c10::Device(c10::kCPU)};
    char* block = static_cast<char*>(c10::alloc_cpu(bytes + kHeader));
    std::memcpy(block, &bytes, sizeof(bytes));
    count(static_cast<int64_t>(bytes));
    void* data = block + kHeader;
    return {data, data, &counted_free, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

bool install_host_allocation_counter() {
  if (g_installed.load()) return true;
  static CountingCpuAllocator allocator;
  // Above the default CPU allocator's priority 0; c10 ignores a lower priority than the current one.
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
  g_installed = c10::GetCPUAllocator() == &allocator;
  return g_installed.load();
}

bool host_allocation_counter_installed() { return g_installed.load(); }

HostAllocation host_allocation() { return {g_current.load(), g_peak.load()}; }

void reset_host_allocation_peak() { g_peak.store(g_current.load()); }

}  // namespace hwt
