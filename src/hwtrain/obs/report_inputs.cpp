// The run-directory side of the report: reading metrics.jsonl, hardware.txt, plan.json and
// config.toml, and writing plan.json.
#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/obs/jsonl_sink.h"
#include "hwtrain/obs/report.h"

namespace hwt {

void write_plan_json(const fs::path& path, const std::vector<PlanRow>& rows) {
  nlohmann::json decisions = nlohmann::json::array();
  for (const auto& r : rows) {
    decisions.push_back({{"decision", r.decision}, {"value", r.value}, {"reason", r.reason}});
  }
  write_file_atomic(path, nlohmann::json{{"decisions", decisions}}.dump(2) + "\n");
}

std::vector<PlanRow> read_plan_json(const fs::path& path) {
  auto j = nlohmann::json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("decisions")) j = j["decisions"];
  if (!j.is_array()) {
    throw DataError(path.string() + ": expected {\"decisions\": [...]} or an array of " +
                    "{decision, value, reason} objects");
  }
  auto text = [](const nlohmann::json& row, const char* key) -> std::string {
    auto it = row.find(key);
    if (it == row.end() || it->is_null()) return "";
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  std::vector<PlanRow> rows;
  for (const auto& row : j) {
    if (!row.is_object()) throw DataError(path.string() + ": a plan row is not an object");
    rows.push_back({text(row, "decision"), text(row, "value"), text(row, "reason")});
  }
  return rows;
}

ReportInputs read_report_inputs(const fs::path& run_dir) {
  const fs::path metrics = run_dir / JsonlSink::kFileName;
  if (!fs::is_regular_file(metrics)) {
    throw DataError("no metrics.jsonl in " + run_dir.string() +
                    ": not a hwtrain run directory, or the run logged nothing");
  }
  ReportInputs in;
  in.title = fs::absolute(run_dir).lexically_normal().filename().string();
  if (in.title.empty()) in.title = run_dir.string();
  MetricHistory h = read_metrics_jsonl(metrics);
  in.steps = std::move(h.steps);
  in.evals = std::move(h.evals);
  in.monitor = std::move(h.monitor);
  if (h.num_bad_lines > 0) {
    in.notes.push_back(std::to_string(h.num_bad_lines) + " line(s) of metrics.jsonl could not " +
                       "be read and were skipped (a run stopped mid-write leaves one).");
  }
  if (fs::is_regular_file(run_dir / kHardwareFileName)) {
    in.hardware_summary = read_file(run_dir / kHardwareFileName);
  }
  if (fs::is_regular_file(run_dir / kPlanFileName)) {
    in.plan = read_plan_json(run_dir / kPlanFileName);
  }
  if (fs::is_regular_file(run_dir / kConfigFileName)) {
    in.config_text = read_file(run_dir / kConfigFileName);
  }
  return in;
}

fs::path write_report_from_run_dir(const fs::path& run_dir) {
  write_report(run_dir, read_report_inputs(run_dir));
  return run_dir / kReportFileName;
}

}  // namespace hwt
