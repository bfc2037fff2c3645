// The run report: a self-contained report.html (inline CSS and SVG, no JavaScript, nothing
// fetched) with plots of training and validation loss, learning rate, throughput, MFU, memory,
// the step-time split and hardware utilization over steps, the final metrics, the hardware
// summary, the plan with its reasons and the resolved config.
// write_report() is called by the trainer at the end of a run; write_report_from_run_dir()
// rebuilds it from the files a run leaves behind (`hwtrain report RUN_DIR`):
//   metrics.jsonl (required), hardware.txt, plan.json (write_plan_json), config.toml.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "hwtrain/obs/metrics.h"

namespace hwt {

namespace fs = std::filesystem;

inline constexpr const char* kReportFileName = "report.html";
inline constexpr const char* kHardwareFileName = "hardware.txt";
inline constexpr const char* kPlanFileName = "plan.json";
inline constexpr const char* kConfigFileName = "config.toml";

// One decision of the planner: what was decided, the value chosen and why.
struct PlanRow {
  std::string decision;
  std::string value;
  std::string reason;
};

struct ReportInputs {
  std::string title = "hwtrain run";
  std::string hardware_summary;  // "" = not recorded
  std::vector<PlanRow> plan;     // empty = not recorded
  std::string config_text;       // resolved config (TOML); "" = not recorded
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  std::vector<MonitorSample> monitor;
  std::vector<std::string> notes;  // shown at the top: how the run ended, skipped lines, ...
};

// The report as HTML text.
std::string render_report_html(const ReportInputs& in);

// Writes <run_dir>/report.html atomically; throws IoError when it cannot.
void write_report(const fs::path& run_dir, const ReportInputs& in);

// Reads a run directory into report inputs. Throws DataError "no metrics.jsonl in <dir>: not a
// hwtrain run directory, or the run logged nothing" when metrics.jsonl is missing; other
// missing files are left empty (shown as "not recorded").
ReportInputs read_report_inputs(const fs::path& run_dir);

// read_report_inputs() then write_report(); returns the path of the report.
fs::path write_report_from_run_dir(const fs::path& run_dir);

// plan.json: {"decisions": [{"decision": ..., "value": ..., "reason": ...}, ...]}.
// Reading also accepts a bare array; a malformed file throws DataError naming it.
void write_plan_json(const fs::path& path, const std::vector<PlanRow>& rows);
std::vector<PlanRow> read_plan_json(const fs::path& path);

// A self-contained HTML page in the report's style (inline CSS, no JavaScript): `body` is the
// markup inside <body>. The sweep report (sweep/sweep_report.h) uses it too.
std::string html_page(const std::string& title, const std::string& body);
// "<p class=meta>generated <time> by hwtrain <version> · extra</p>".
std::string generated_line(const std::string& extra);

}  // namespace hwt
