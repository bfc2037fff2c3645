// TorchProfiler: LibTorch's own profiler (Kineto, built into the torch wheel's libtorch_cpu even
// though CMake prints "library kineto not found": there is no separate libkineto to link) records
// every ATen operator, GPU kernel and, optionally, allocation between start() and stop(), and
// writes them as a Chrome trace. Where the profiler cannot start, start() says why once and
// returns false; training goes on unprofiled.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace at {
class RecordFunction;
}

namespace hwt {

struct TorchProfilerOptions {
  bool record_memory = true;   // allocation events ([memory] in the trace; peaks in the report)
  bool record_shapes = false;  // input shapes per operator: larger traces, slower profiling
  bool cuda = true;            // also GPU kernels when CUDA is available
};

class TorchProfiler {
 public:
  explicit TorchProfiler(TorchProfilerOptions options = {});
  ~TorchProfiler();  // stops a running profile without saving it
  TorchProfiler(const TorchProfiler&) = delete;
  TorchProfiler& operator=(const TorchProfiler&) = delete;

  // Starts profiling on this thread; false (with a warning) when LibTorch's profiler is unavailable.
  bool start();
  bool active() const { return active_; }
  // Marks the beginning of training step `step` (a "ProfilerStep#<step>" range, as PyTorch's
  // Python profiler draws); ends the previous one.
  void begin_step(int64_t step);
  // Stops profiling and writes the Chrome trace to `path` atomically. Returns false (with a
  // warning) when there was nothing to stop or the trace could not be written.
  bool stop_and_save(const std::filesystem::path& path);

 private:
  void end_step();

  TorchProfilerOptions options_;
  bool active_ = false;
  std::unique_ptr<at::RecordFunction> step_range_;
};

}  // namespace hwt
