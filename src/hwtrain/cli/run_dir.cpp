#include "hwtrain/cli/run_dir.h"

#include <algorithm>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/obs/csv_sink.h"
#include "hwtrain/obs/jsonl_sink.h"
#include "hwtrain/obs/profile_report.h"
#include "hwtrain/obs/report.h"

namespace hwt::cli {

namespace fs = std::filesystem;

const std::vector<std::string>& run_output_names() {
  static const std::vector<std::string> names = {
      kConfigFileName, kPlanFileName,      kHardwareFileName, "hardware.json", JsonlSink::kFileName,
      CsvSink::kStepFileName, CsvSink::kEvalFileName, kReportFileName, kPhaseTraceFile, kOpsTraceFile,
      "tb",            "checkpoints"};
  return names;
}

std::vector<std::string> existing_run_outputs(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& name : run_output_names()) {
    if (fs::exists(fs::symlink_status(dir / name, ec))) found.push_back(name);
  }
  return found;
}

namespace {
// True when `path` lies inside `dir` (both made absolute and normal; symlinks are not resolved).
bool is_inside(const fs::path& path, const fs::path& dir) {
  const fs::path rel = fs::absolute(path).lexically_normal().lexically_relative(fs::absolute(dir).lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}
}  // namespace

void check_out_dir(const fs::path& out, const std::optional<fs::path>& checkpoint, bool overwrite) {
  const bool resumes_this_run = checkpoint && is_inside(*checkpoint, out);
  if (overwrite && resumes_this_run) {
    throw ConfigError("--overwrite would delete " + out.string() + ", which holds the checkpoint being resumed (" +
                      checkpoint->string() + "); drop --overwrite to continue that run");
  }
  if (overwrite || resumes_this_run) return;
  const std::vector<std::string> found = existing_run_outputs(out);
  if (found.empty()) return;
  // What a run writes at start-up alone (a run that failed before its first step): nothing to lose,
  // and its retry rewrites them; a metric line, a checkpoint or a report is a run's work. plan.json
  // among them says hwtrain wrote them: a config.toml or doctor's hardware.json alone may be the
  // user's own, and stays refused.
  const std::vector<std::string> start_up = {kConfigFileName, kPlanFileName, kHardwareFileName, "hardware.json"};
  const bool only_start_up = std::all_of(found.begin(), found.end(), [&](const std::string& name) {
    return std::find(start_up.begin(), start_up.end(), name) != start_up.end();
  });
  if (only_start_up && std::find(found.begin(), found.end(), kPlanFileName) != found.end()) return;
  throw ConfigError("--out " + out.string() + " already holds a run (" + join(found, ", ") +
                    "); continue it with --resume " + out.string() +
                    ", replace it with --overwrite, or choose another directory");
}

std::vector<std::string> clear_run_outputs(const fs::path& dir) {
  std::vector<std::string> removed;
  for (const auto& name : existing_run_outputs(dir)) {
    std::error_code ec;
    fs::remove_all(dir / name, ec);  // a symlink is removed itself, never its target
    if (ec) throw IoError("--overwrite: cannot remove " + (dir / name).string() + ": " + ec.message());
    removed.push_back(name);
  }
  return removed;
}

}  // namespace hwt::cli
