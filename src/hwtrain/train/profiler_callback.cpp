#include "hwtrain/train/profiler_callback.h"

#include <cmath>
#include <regex>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/obs/obs_config.h"
#include "hwtrain/obs/profile_report.h"

namespace hwt {

namespace {
constexpr int64_t kPid = 0;
constexpr int64_t kLoopTid = 1;
}  // namespace

ProfileRange parse_profile_steps(const std::string& spec) {
  ObsConfig::check_profile_steps(spec);  // ConfigError naming log.profile_steps
  const size_t colon = spec.find(':');
  return {std::stoll(spec.substr(0, colon)), std::stoll(spec.substr(colon + 1))};
}

std::string rank_file_name(const std::string& file_name, int rank) {
  if (rank == 0) return file_name;
  const auto dot = file_name.rfind('.');
  const std::string tag = ".rank" + std::to_string(rank);
  return dot == std::string::npos ? file_name + tag : file_name.substr(0, dot) + tag + file_name.substr(dot);
}

ProfilerCallback::ProfilerCallback(ProfilerOptions options) : options_(std::move(options)) {
  if (options_.steps.first < 1 || options_.steps.first > options_.steps.last) {
    throw ConfigError("profiler: step range " + std::to_string(options_.steps.first) + ":" +
                      std::to_string(options_.steps.last) + " is not valid: expected 1 <= a <= b");
  }
  trace_.set_process_name(kPid, "hwtrain");
  trace_.set_thread_name(kPid, kLoopTid, "training step phases (from step metrics)");
}

void ProfilerCallback::on_train_begin(TrainerControl& t) {
  run_dir_ = t.run_dir();
  const int64_t next = t.step() + 1;
  if (next > options_.steps.last) {
    log_warn("profiler: log.profile_steps = {}:{} lies before this run's first step {}; nothing is profiled",
             options_.steps.first, options_.steps.last, next);
    finished_ = true;
    return;
  }
  if (options_.steps.contains(next)) start_operators(next);
}

void ProfilerCallback::start_operators(int64_t first_step) {
  if (!options_.operators || profiler_) return;
  profiler_ = std::make_unique<TorchProfiler>(options_.torch);
  if (profiler_->start()) profiler_->begin_step(first_step);
}

void ProfilerCallback::on_step_end(TrainerControl&, const StepMetrics& m) {
  if (finished_) return;
  if (options_.steps.contains(m.step)) add_step(m);
  if (m.step >= options_.steps.last) {
    finish();
    return;
  }
  const int64_t next = m.step + 1;
  if (next == options_.steps.first) {
    start_operators(next);  // begins step `next` too
  } else if (profiler_ && options_.steps.contains(next)) {
    profiler_->begin_step(next);
  }
}

void ProfilerCallback::add_step(const StepMetrics& m) {
  const double end = m.elapsed_seconds, total = m.step_seconds;
  if (!std::isfinite(end) || !std::isfinite(total)) {
    warn_once("profiler-times", "profiler: step metrics lack elapsed_seconds or step_seconds; no phase trace");
    return;
  }
  const double start = end - total;
  ++num_steps_;
  trace_.add_complete("step " + std::to_string(m.step), "step", start, total, kPid, kLoopTid,
                      {{"loss", m.loss}, {"lr", m.lr}, {"tokens_per_second", m.tokens_per_second}, {"mfu", m.mfu}});
  // The order the trainer runs them in; phases it did not time (NaN) are left out.
  const std::pair<const char*, double> phases[] = {{"data_wait", m.data_wait_seconds},
                                                   {"forward", m.forward_seconds},
                                                   {"backward", m.backward_seconds},
                                                   {"comm", m.comm_seconds},
                                                   {"optimizer", m.optimizer_seconds}};
  double at = start;
  for (const auto& [name, seconds] : phases) {
    if (!std::isfinite(seconds)) continue;
    trace_.add_complete(name, kPhaseCategory, at, seconds, kPid, kLoopTid, {{"step", static_cast<double>(m.step)}});
    at += std::max(0.0, seconds);
  }
  trace_.add_counter("loss", end, {{"loss", m.loss}});
  trace_.add_counter("tokens/s", end, {{"tokens_per_second", m.tokens_per_second}});
  trace_.add_counter("memory", end,
                     {{"rss_bytes", m.rss_bytes},
                      {"device_allocated_bytes", m.device_allocated_bytes},
                      {"device_reserved_bytes", m.device_reserved_bytes}});
}

void ProfilerCallback::on_train_end(TrainerControl&) { finish(); }

void ProfilerCallback::finish() {
  if (finished_) return;
  finished_ = true;
  if (run_dir_.empty()) return;  // never began
  if (profiler_ && profiler_->active()) {
    const auto path = run_dir_ / rank_file_name(kOpsTraceFile, options_.rank);
    if (profiler_->stop_and_save(path)) ops_trace_path_ = path;
  }
  profiler_.reset();
  if (num_steps_ == 0) {
    log_warn("profiler: no step in {}:{} ran; no trace written", options_.steps.first, options_.steps.last);
    return;
  }
  const auto path = run_dir_ / rank_file_name(kPhaseTraceFile, options_.rank);
  try {
    std::filesystem::create_directories(run_dir_);
    trace_.write(path);
    phase_trace_path_ = path;
    log_info("profiler: step-phase trace {} ({} steps); open it in https://ui.perfetto.dev", path.string(), num_steps_);
  } catch (const std::exception& e) {
    log_warn("profiler: could not write {}: {}", path.string(), e.what());
  }
}

}  // namespace hwt
