#include "hwtrain/obs/monitor.h"

#include <unistd.h>

#include <time.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "hwtrain/obs/nvml.h"

namespace hwt {

double process_rss_bytes() {
  std::ifstream in("/proc/self/statm");
  long total_pages = 0, resident_pages = 0;
  if (!(in >> total_pages >> resident_pages)) return kUnknown;
  return static_cast<double>(resident_pages) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

double process_cpu_seconds() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return kUnknown;
  // Field 2 (the command name) may contain spaces; fields after its ')' are space-separated.
  auto close = line.rfind(')');
  if (close == std::string::npos) return kUnknown;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  double utime = 0, stime = 0;
  // rest starts at field 3 (state); utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  if (!rest) return kUnknown;
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

HardwareMonitor::HardwareMonitor(double interval_seconds, bool use_nvml) {
  if (interval_seconds > 0) thread_ = std::thread([=] { run(interval_seconds, use_nvml); });
}

HardwareMonitor::~HardwareMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<MonitorSample> HardwareMonitor::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

std::optional<MonitorSample> HardwareMonitor::poll_new() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (num_polled_ == num_samples_) return std::nullopt;
  num_polled_ = num_samples_;
  return latest_;
}

uint64_t HardwareMonitor::num_samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_samples_;
}

void HardwareMonitor::run(double interval_seconds, bool use_nvml) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::optional<Nvml> nvml;
  if (use_nvml) nvml.emplace();  // dlopen + nvmlInit here, off the training thread
  double last_cpu = process_cpu_seconds();
  auto last_time = start;
  const auto interval = std::chrono::duration<double>(interval_seconds);
  bool first = true;  // CPU utilization needs an interval; the first sample has none

  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    lock.unlock();
    MonitorSample s;
    const auto now = Clock::now();
    s.step = step_.load(std::memory_order_relaxed);
    s.elapsed_seconds = std::chrono::duration<double>(now - start).count();
    const double cpu = process_cpu_seconds();
    const double wall = std::chrono::duration<double>(now - last_time).count();
    if (!first && wall > 0) s.process_cpu_percent = 100.0 * (cpu - last_cpu) / wall;
    last_cpu = cpu;
    last_time = now;
    first = false;
    s.rss_bytes = process_rss_bytes();
    if (nvml && nvml->available()) s.gpus = nvml->sample();
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
      thread_cpu_seconds_.store(static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec),
                                std::memory_order_relaxed);
    }
    lock.lock();
    latest_ = std::move(s);
    ++num_samples_;
    wake_.wait_for(lock, interval, [this] { return stop_; });
  }
}

}  // namespace hwt
