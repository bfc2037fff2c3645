#include "hwtrain/obs/metrics_recorder.h"

#include <chrono>

#include "hwtrain/core/files.h"
#include "hwtrain/obs/csv_sink.h"
#include "hwtrain/obs/jsonl_sink.h"
#include "hwtrain/obs/tensorboard_sink.h"

namespace hwt {

namespace {
double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

MetricsRecorder::MetricsRecorder(double flush_seconds, std::function<double()> clock)
    : flush_seconds_(flush_seconds), clock_(clock ? std::move(clock) : steady_seconds) {
  last_flush_ = clock_();
}

MetricsRecorder::~MetricsRecorder() { flush(); }

void MetricsRecorder::add_sink(std::unique_ptr<MetricSink> sink) {
  if (sink) sinks_.push_back(std::move(sink));
}

void MetricsRecorder::add_sinks(std::vector<std::unique_ptr<MetricSink>> sinks) {
  for (auto& s : sinks) add_sink(std::move(s));
}

void MetricsRecorder::on_step(const StepMetrics& m) {
  steps_.push_back(m);
  for (auto& s : sinks_) s->on_step(m);
  maybe_flush();
}

void MetricsRecorder::on_eval(const EvalMetrics& m) {
  evals_.push_back(m);
  for (auto& s : sinks_) s->on_eval(m);
  maybe_flush();
}

void MetricsRecorder::on_monitor(const MonitorSample& m) {
  monitor_.push_back(m);
  for (auto& s : sinks_) s->on_monitor(m);
  maybe_flush();
}

void MetricsRecorder::flush() {
  for (auto& s : sinks_) s->flush();
  last_flush_ = clock_();
}

void MetricsRecorder::maybe_flush() {
  if (clock_() - last_flush_ >= flush_seconds_) flush();
}

std::vector<std::unique_ptr<MetricSink>> make_file_sinks(const std::filesystem::path& run_dir,
                                                         const ObsConfig& config, bool append) {
  ensure_writable_dir(run_dir);
  std::vector<std::unique_ptr<MetricSink>> sinks;
  if (config.jsonl) sinks.push_back(std::make_unique<JsonlSink>(run_dir, append));
  if (config.csv) sinks.push_back(std::make_unique<CsvSink>(run_dir, append));
  if (config.tensorboard) sinks.push_back(std::make_unique<TensorBoardSink>(run_dir / "tb"));
  return sinks;
}

}  // namespace hwt
