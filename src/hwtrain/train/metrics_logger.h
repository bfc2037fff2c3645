// MetricsLogger: the callback that records every log_interval-th step (with the first and the last,
// however the run ended) and every evaluation into the metric sinks (progress display,
// metrics.jsonl/csv, TensorBoard), runs the hardware monitor, and writes
// report.html at the end. Opening the sinks in the constructor makes an unwritable run
// directory fail before training starts.
#pragma once
#include <memory>
#include <optional>

#include "hwtrain/obs/metrics_recorder.h"
#include "hwtrain/obs/monitor.h"
#include "hwtrain/obs/obs_config.h"
#include "hwtrain/obs/progress.h"
#include "hwtrain/train/callback.h"

namespace hwt {

class MetricsLogger : public Callback {
 public:
  // `resumed`: append to the run directory's existing metric files.
  MetricsLogger(const std::filesystem::path& run_dir, const ObsConfig& config, int64_t max_steps,
                int64_t log_interval, bool logging_rank, bool resumed);
  std::string name() const override { return "metrics_logger"; }
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;
  void on_evaluation_end(TrainerControl& t, const EvalMetrics& m) override;
  void on_train_end(TrainerControl& t) override;
  const MetricsRecorder& recorder() const { return *recorder_; }
  // CPU time the hardware monitor's thread used (final once training has ended).
  double monitor_cpu_seconds() const { return monitor_ ? monitor_->thread_cpu_seconds() : monitor_cpu_seconds_; }

 private:
  std::unique_ptr<MetricsRecorder> recorder_;
  ProgressDisplay* progress_ = nullptr;  // owned by recorder_
  std::unique_ptr<HardwareMonitor> monitor_;
  int64_t log_interval_;
  int64_t max_steps_;
  std::optional<StepMetrics> unlogged_;  // the latest step, when log_interval skipped it
  bool log_next_;  // a resumed run writes its first step: readers drop what an abandoned run wrote past it
  bool report_;
  bool logging_rank_;
  uint64_t monitor_samples_seen_ = 0;
  double monitor_cpu_seconds_ = 0.0;
};

}  // namespace hwt
