#include "hwtrain/obs/jsonl_sink.h"

#include <fstream>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/metrics_json.h"

namespace hwt {

JsonlSink::JsonlSink(const std::filesystem::path& run_dir, bool append)
    : file_(run_dir / kFileName, append) {}

void JsonlSink::on_step(const StepMetrics& m) { file_.write(to_json(m).dump() + "\n"); }
void JsonlSink::on_eval(const EvalMetrics& m) { file_.write(to_json(m).dump() + "\n"); }
void JsonlSink::on_monitor(const MonitorSample& s) { file_.write(to_json(s).dump() + "\n"); }

namespace {
// Drops records from `step` on: a resumed run is about to log them again.
void rewind_to(MetricHistory& h, int64_t step) {
  while (!h.steps.empty() && h.steps.back().step >= step) h.steps.pop_back();
  while (!h.evals.empty() && h.evals.back().step >= step) h.evals.pop_back();
  while (!h.monitor.empty() && h.monitor.back().step >= step) h.monitor.pop_back();
}
}  // namespace

MetricHistory read_metrics_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read " + path.string());
  MetricHistory h;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("type")) {
      ++h.num_bad_lines;
      continue;
    }
    try {
      const std::string type = j["type"].is_string() ? j["type"].get<std::string>() : "";
      if (type == "step") {
        StepMetrics m = step_metrics_from_json(j);
        if (!h.steps.empty() && h.steps.back().step >= m.step) rewind_to(h, m.step);
        h.steps.push_back(m);
      } else if (type == "eval") {
        EvalMetrics m = eval_metrics_from_json(j);
        while (!h.evals.empty() && h.evals.back().step >= m.step) h.evals.pop_back();
        h.evals.push_back(m);
      } else if (type == "monitor") {
        h.monitor.push_back(monitor_sample_from_json(j));
      } else {
        ++h.num_bad_lines;
      }
    } catch (const DataError&) {
      ++h.num_bad_lines;
    }
  }
  return h;
}

}  // namespace hwt
