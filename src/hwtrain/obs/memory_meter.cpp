#include "hwtrain/obs/memory_meter.h"

#include <dlfcn.h>
#include <malloc.h>

#include <fstream>
#include <string>

#include "hwtrain/obs/metrics.h"

#ifdef HWTRAIN_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace hwt {

DeviceMemory device_memory(int cuda_device) {
#ifdef HWTRAIN_CUDA
  if (cuda_device >= 0 && cuda_device < static_cast<int>(c10::cuda::device_count())) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(cuda_device));
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return {static_cast<double>(stats.allocated_bytes[all].current),
            static_cast<double>(stats.reserved_bytes[all].current),
            static_cast<double>(stats.allocated_bytes[all].peak)};
  }
#endif
  (void)cuda_device;
  return {kUnknown, kUnknown, kUnknown};
}

void reset_device_peak(int cuda_device) {
#ifdef HWTRAIN_CUDA
  if (cuda_device >= 0 && cuda_device < static_cast<int>(c10::cuda::device_count())) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(cuda_device));
  }
#endif
  (void)cuda_device;
}

double process_peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;  // "VmHWM:  123 kB"
  }
  return kUnknown;
}

bool reset_process_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

void release_free_host_memory() {
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  static const auto mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl) {
    // MALLCTL_ARENAS_ALL = 4096: every arena; threads' caches first so their blocks are freed too.
    mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
    mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
  } else {
    malloc_trim(0);
  }
}

}  // namespace hwt
