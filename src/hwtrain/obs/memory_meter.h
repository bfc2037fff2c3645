// Memory as training measures it, for per-step metrics and the micro-batch probe: the process's
// resident set (current, and peak since the last reset, from /proc) and CUDA's caching allocator
// (allocated, reserved, peak) in CUDA builds. Host memory that the allocator keeps cached can be
// handed back first, so that a peak measures the step and not what earlier steps left behind.
#pragma once

namespace hwt {

struct DeviceMemory {
  double allocated_bytes;  // kUnknown (NaN) where there is no CUDA device
  double reserved_bytes;
  double peak_bytes;       // peak allocated since the last reset_device_peak()
};
DeviceMemory device_memory(int cuda_device);
void reset_device_peak(int cuda_device);

// VmHWM of /proc/self/status: the peak resident set since the process started or the last reset.
double process_peak_rss_bytes();
// Resets VmHWM to the current resident set (/proc/self/clear_refs, Linux 4.0+); false where refused.
bool reset_process_peak_rss();
// Returns cached free pages to the OS: jemalloc's arenas are purged when jemalloc is the malloc
// (found at run time), glibc's heap is trimmed otherwise.
void release_free_host_memory();

}  // namespace hwt
