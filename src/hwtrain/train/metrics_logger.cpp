#include "hwtrain/train/metrics_logger.h"

#include "hwtrain/obs/log.h"
#include "hwtrain/obs/report.h"

namespace hwt {

MetricsLogger::MetricsLogger(const std::filesystem::path& run_dir, const ObsConfig& config, int64_t max_steps,
                             int64_t log_interval, bool logging_rank, bool resumed)
    : recorder_(std::make_unique<MetricsRecorder>(config)),
      log_interval_(log_interval),
      max_steps_(max_steps),
      log_next_(resumed),
      report_(config.report),
      logging_rank_(logging_rank) {
  if (!logging_rank_) return;
  auto progress = std::make_unique<ProgressDisplay>(resolve_progress_mode(config.progress), max_steps);
  progress_ = progress.get();
  recorder_->add_sinks(make_file_sinks(run_dir, config, resumed));
  recorder_->add_sink(std::move(progress));
  if (config.gpu_log_interval > 0) monitor_ = std::make_unique<HardwareMonitor>(config.gpu_log_interval);
}

void MetricsLogger::on_step_end(TrainerControl& t, const StepMetrics& m) {
  if (!logging_rank_) return;
  if (monitor_) {
    monitor_->set_step(m.step);
    if (monitor_->num_samples() != monitor_samples_seen_) {
      monitor_samples_seen_ = monitor_->num_samples();
      if (auto s = monitor_->latest()) recorder_->on_monitor(*s);
    }
  }
  // Sinks see every log_interval-th step (and the first and the last), so files stay small on long
  // runs; a run that stops early (time budget, early stopping, a signal) has its last step written
  // at the end, so reports and sweeps read the final loss; a resumed run writes its first step, so
  // readers (which restart at a step number not past the last) drop an abandoned run's later lines.
  if (m.step % log_interval_ == 0 || m.step == 1 || m.step == max_steps_ || log_next_) {
    recorder_->on_step(m);
    unlogged_.reset();
    log_next_ = false;
  } else {
    unlogged_ = m;
  }
}

void MetricsLogger::on_evaluation_end(TrainerControl&, const EvalMetrics& m) {
  if (logging_rank_) recorder_->on_eval(m);
}

void MetricsLogger::on_train_end(TrainerControl& t) {
  if (!logging_rank_) return;
  if (unlogged_) recorder_->on_step(*unlogged_);
  unlogged_.reset();
  if (progress_) progress_->finish();
  recorder_->flush();
  if (monitor_) monitor_cpu_seconds_ = monitor_->thread_cpu_seconds();
  monitor_.reset();
  if (report_) {
    try {
      auto path = write_report_from_run_dir(t.run_dir());
      log_info("report: {}", path.string());
    } catch (const std::exception& e) {
      log_warn("could not write the run report: {}", e.what());
    }
  }
}

}  // namespace hwt
