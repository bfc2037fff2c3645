// HardwareMonitor: a background thread that samples the process's CPU utilization and RSS
// (/proc/self) and, through NVML where present (nvml.h), GPU utilization, memory, temperature and
// power, every `interval_seconds`. It never touches the training thread's device work (NVML
// talks to the driver, not to a CUDA context). Interval 0 disables it: no thread is started.
// Also process_rss_bytes() for the trainer's per-step record.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "hwtrain/obs/metrics.h"

namespace hwt {

class HardwareMonitor {
 public:
  // Starts sampling (first sample at once) unless interval_seconds <= 0. `use_nvml` false skips
  // GPU sampling (tests; CPU-only runs that want no driver calls).
  explicit HardwareMonitor(double interval_seconds, bool use_nvml = true);
  ~HardwareMonitor();  // stops and joins the thread (wakes it; does not wait for the interval)
  HardwareMonitor(const HardwareMonitor&) = delete;
  HardwareMonitor& operator=(const HardwareMonitor&) = delete;

  bool running() const { return thread_.joinable(); }
  // The step the trainer is at; stored in later samples (an atomic store, cheap in the hot loop).
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  // The most recent sample, if any.
  std::optional<MonitorSample> latest() const;
  // The most recent sample if it was not returned by poll_new() before (to forward each sample to
  // the metric sinks once).
  std::optional<MonitorSample> poll_new();
  uint64_t num_samples() const;
  // CPU time the sampling thread has used so far (its own clock; the cost of monitoring).
  double thread_cpu_seconds() const { return thread_cpu_seconds_.load(std::memory_order_relaxed); }

 private:
  void run(double interval_seconds, bool use_nvml);

  std::atomic<int64_t> step_{-1};
  std::atomic<double> thread_cpu_seconds_{0.0};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::optional<MonitorSample> latest_;
  uint64_t num_samples_ = 0;
  uint64_t num_polled_ = 0;
  std::thread thread_;
};

// Resident set size of this process in bytes (/proc/self/statm); NaN where unavailable.
double process_rss_bytes();
// User + system CPU time of this process in seconds (/proc/self/stat); NaN where unavailable.
double process_cpu_seconds();

}  // namespace hwt
