// MetricsRecorder: the one object the trainer hands its metrics to. It forwards each record to
// the sinks it owns, flushes them every `flush_seconds` (checked on each call: no thread) and on
// destruction, and keeps the whole history in memory for the run report and callbacks.
// make_file_sinks() opens the file sinks an ObsConfig asks for, so that an unwritable run
// directory fails before training starts. Not thread-safe: call from the training thread.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "hwtrain/obs/metrics.h"
#include "hwtrain/obs/obs_config.h"

namespace hwt {

class MetricsRecorder {
 public:
  // `clock` returns seconds on a monotonic scale; tests pass a fake one.
  explicit MetricsRecorder(double flush_seconds, std::function<double()> clock = {});
  explicit MetricsRecorder(const ObsConfig& config) : MetricsRecorder(config.flush_seconds) {}
  ~MetricsRecorder();  // flushes every sink
  MetricsRecorder(const MetricsRecorder&) = delete;
  MetricsRecorder& operator=(const MetricsRecorder&) = delete;

  void add_sink(std::unique_ptr<MetricSink> sink);
  void add_sinks(std::vector<std::unique_ptr<MetricSink>> sinks);

  void on_step(const StepMetrics& m);
  void on_eval(const EvalMetrics& m);
  void on_monitor(const MonitorSample& s);
  // Flushes every sink now (at the end of training, on Ctrl-C, before a checkpoint).
  void flush();

  const std::vector<StepMetrics>& steps() const { return steps_; }
  const std::vector<EvalMetrics>& evals() const { return evals_; }
  const std::vector<MonitorSample>& monitor_samples() const { return monitor_; }
  size_t num_sinks() const { return sinks_.size(); }

 private:
  void maybe_flush();

  double flush_seconds_;
  std::function<double()> clock_;
  double last_flush_;
  std::vector<std::unique_ptr<MetricSink>> sinks_;
  std::vector<StepMetrics> steps_;
  std::vector<EvalMetrics> evals_;
  std::vector<MonitorSample> monitor_;
};

// The file sinks `config` enables (jsonl, csv, tensorboard), opened in `run_dir`. With `append`,
// existing files are extended (a resumed run), otherwise they are replaced. Throws IoError
// naming the path when the directory or a file cannot be written.
std::vector<std::unique_ptr<MetricSink>> make_file_sinks(const std::filesystem::path& run_dir,
                                                         const ObsConfig& config,
                                                         bool append = false);

}  // namespace hwt
