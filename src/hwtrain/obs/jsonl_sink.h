// JsonlSink: metrics.jsonl in the run directory, one JSON object per line with "type": "step",
// "eval" or "monitor" (format in metrics_json.h). read_metrics_jsonl() reads it back for the
// report and for tools.
#pragma once
#include <filesystem>
#include <vector>

#include "hwtrain/obs/metrics.h"
#include "hwtrain/obs/sink_file.h"

namespace hwt {

class JsonlSink : public MetricSink {
 public:
  static constexpr const char* kFileName = "metrics.jsonl";
  // Opens <run_dir>/metrics.jsonl; throws IoError when it cannot be written.
  explicit JsonlSink(const std::filesystem::path& run_dir, bool append = false);
  ~JsonlSink() override { flush(); }

  void on_step(const StepMetrics& m) override;
  void on_eval(const EvalMetrics& m) override;
  void on_monitor(const MonitorSample& s) override;
  void flush() override { file_.flush(); }

 private:
  SinkFile file_;
};

struct MetricHistory {
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  std::vector<MonitorSample> monitor;
  int num_bad_lines = 0;  // lines that did not parse (a run killed mid-write leaves one)
};

// Reads a metrics.jsonl. When a resumed run appended records for steps it had already logged
// before the restart, the later records replace the earlier ones from that step on. Throws
// IoError when the file cannot be read; malformed lines are skipped and counted.
MetricHistory read_metrics_jsonl(const std::filesystem::path& path);

}  // namespace hwt
