#include "hwtrain/obs/tensorboard_sink.h"

#include <unistd.h>

#include <chrono>

#include "hwtrain/core/files.h"
#include "hwtrain/obs/tfrecord.h"

namespace hwt {

namespace {
double unix_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// TensorBoard's own name; the pid is added only when two writers start in the same second.
std::filesystem::path event_file_path(const std::filesystem::path& dir) {
  const std::string base = "events.out.tfevents." +
                           std::to_string(static_cast<int64_t>(unix_seconds())) + "." +
                           host_name();
  std::filesystem::path p = dir / base;
  for (int i = 0; std::filesystem::exists(p); ++i) {
    p = dir / (base + "." + std::to_string(::getpid()) + (i ? "." + std::to_string(i) : ""));
  }
  return p;
}

template <class Record>
void add_fields(std::vector<std::pair<std::string, float>>& out,
                const std::vector<MetricField<Record>>& fields, const Record& r) {
  for (const auto& f : fields) {
    if (std::string(f.name) == "step") continue;
    if (auto v = f.get(r)) out.emplace_back(std::string(f.group) + "/" + f.name, float(*v));
  }
}

void add(std::vector<std::pair<std::string, float>>& out, const std::string& tag, double v) {
  if (v == v) out.emplace_back(tag, static_cast<float>(v));
}
}  // namespace

TensorBoardSink::TensorBoardSink(const std::filesystem::path& dir) {
  ensure_writable_dir(dir);
  file_ = std::make_unique<SinkFile>(event_file_path(dir), /*append=*/false);
  file_->write(tfrecord_frame(encode_file_version_event(unix_seconds())));
  file_->flush();  // TensorBoard lists the run as soon as the file is there
}

void TensorBoardSink::write_scalars(int64_t step,
                                    const std::vector<std::pair<std::string, float>>& scalars) {
  if (scalars.empty()) return;
  file_->write(tfrecord_frame(encode_scalars_event(unix_seconds(), step, scalars)));
}

void TensorBoardSink::on_step(const StepMetrics& m) {
  std::vector<std::pair<std::string, float>> scalars;
  add_fields(scalars, step_fields(), m);
  write_scalars(m.step, scalars);
}

void TensorBoardSink::on_eval(const EvalMetrics& m) {
  std::vector<std::pair<std::string, float>> scalars;
  add_fields(scalars, eval_fields(), m);
  write_scalars(m.step, scalars);
}

void TensorBoardSink::on_monitor(const MonitorSample& s) {
  std::vector<std::pair<std::string, float>> scalars;
  add(scalars, "hw/process_cpu_percent", s.process_cpu_percent);
  add(scalars, "hw/rss_bytes", s.rss_bytes);
  for (const auto& g : s.gpus) {
    const std::string p = "hw/gpu" + std::to_string(g.index) + "/";
    add(scalars, p + "utilization_percent", g.utilization_percent);
    add(scalars, p + "memory_used_bytes", g.memory_used_bytes);
    add(scalars, p + "temperature_celsius", g.temperature_celsius);
    add(scalars, p + "power_watts", g.power_watts);
  }
  write_scalars(s.step < 0 ? 0 : s.step, scalars);
}

}  // namespace hwt
