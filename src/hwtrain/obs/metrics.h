// The metric records of a run and the sink interface that receives them.
// StepMetrics is filled by the trainer for each logged step, EvalMetrics after each evaluation,
// MonitorSample by the hardware monitor thread (obs/monitor.h). Unknown values are NaN (doubles)
// or -1 (counts). The field tables below are the one list of metric names: sinks, the report and
// callbacks' `monitor` keys all go through them. No file I/O here (see jsonl_sink.h and friends).
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace hwt {

inline constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

struct StepMetrics {
  int64_t step = 0;
  double loss = kUnknown;
  double lr = kUnknown;
  double grad_norm = kUnknown;
  double tokens_per_second = kUnknown;
  double mfu = kUnknown;  // fraction of the hardware's peak FLOP/s, 0..1 (shown as a percentage)
  double step_seconds = kUnknown;
  double data_wait_seconds = kUnknown;
  double forward_seconds = kUnknown;
  double backward_seconds = kUnknown;
  double optimizer_seconds = kUnknown;
  double comm_seconds = kUnknown;
  double rss_bytes = kUnknown;
  double device_allocated_bytes = kUnknown;
  double device_reserved_bytes = kUnknown;
  double device_peak_bytes = kUnknown;
  double loss_scale = kUnknown;
  int64_t skipped_steps = -1;  // steps skipped so far by the loss scaler (non-finite gradients)
  int64_t tokens_seen = -1;
  double elapsed_seconds = kUnknown;  // since the start of training
};

struct EvalMetrics {
  int64_t step = 0;
  double val_loss = kUnknown;
  double val_perplexity = kUnknown;
  double elapsed_seconds = kUnknown;
};

// One GPU as seen by NVML.
struct GpuSample {
  int index = 0;
  double utilization_percent = kUnknown;
  double memory_used_bytes = kUnknown;
  double memory_total_bytes = kUnknown;
  double temperature_celsius = kUnknown;
  double power_watts = kUnknown;
};

// One sample of the hardware monitor (obs/monitor.h). `step` is the training step the trainer
// last announced to the monitor (-1 before the first).
struct MonitorSample {
  int64_t step = -1;
  double elapsed_seconds = kUnknown;        // since the monitor started
  double process_cpu_percent = kUnknown;    // 100 = one core busy
  double rss_bytes = kUnknown;
  std::vector<GpuSample> gpus;              // empty when NVML is absent
};

// Receives metrics as they are produced. Implementations buffer and write on flush(); the
// destructor of every sink flushes (and closes) what it holds.
class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void on_step(const StepMetrics& m) = 0;
  virtual void on_eval(const EvalMetrics& m) = 0;
  // Hardware monitor samples; sinks that have no place for them ignore them.
  virtual void on_monitor(const MonitorSample& s) {}
  virtual void flush() = 0;
};

// A named field of a record: exactly one of `real` / `integer` is set.
template <class Record>
struct MetricField {
  const char* name;
  const char* group;  // TensorBoard tag prefix and report grouping: train, perf, time, memory, eval
  double Record::*real;
  int64_t Record::*integer;

  // The value as a double; nullopt when unknown (NaN or a negative count).
  std::optional<double> get(const Record& r) const {
    if (real) {
      double v = r.*real;
      if (v != v) return std::nullopt;
      return v;
    }
    int64_t v = r.*integer;
    if (v < 0) return std::nullopt;
    return static_cast<double>(v);
  }
};

// The fields of each record in a fixed order ("step" first).
const std::vector<MetricField<StepMetrics>>& step_fields();
const std::vector<MetricField<EvalMetrics>>& eval_fields();

// Names a callback may monitor: every step and eval field except "step" and "elapsed_seconds".
std::vector<std::string> available_metric_names();

// True for names that come with evaluations (val_loss, val_perplexity).
bool is_eval_metric(const std::string& name);
// Whether each process of a distributed run measures `name` for itself (speed, time, memory: the
// "perf", "time" and "memory" groups), so that ranks see different values; the training and
// evaluation metrics (loss, lr, grad_norm, val_loss, ...) are the same on every rank.
bool is_rank_local_metric(const std::string& name);

// Throws ConfigError "<key>: unknown metric '<name>' (did you mean ...?); available: ..." for a
// name not in available_metric_names(). Call once when a callback is configured.
void check_metric_name(const std::string& name, const std::string& key);

// The value of a metric in a record; nullopt when the record does not carry it (a step record
// asked for val_loss) or the value is unknown. Throws ConfigError for an unknown name.
std::optional<double> metric_value(const std::string& name, const StepMetrics& m);
std::optional<double> metric_value(const std::string& name, const EvalMetrics& m);

}  // namespace hwt
