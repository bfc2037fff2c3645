// The sweep's report.html (in the run report's style: one self-contained page, inline SVG, no
// JavaScript): the study and its best trial, the optimization history (each completed trial's
// objective and the best so far, by trial number), each parameter's importance (param_importance.h,
// with its measure named), a slice plot per parameter (the objective against its values), and the
// trials table.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "hwtrain/sweep/search_space.h"
#include "hwtrain/sweep/sweep_config.h"
#include "hwtrain/sweep/trial.h"

namespace hwt::sweep {

struct SweepReportInputs {
  std::string study;  // the study file, for the title
  std::string objective;
  Direction direction = Direction::kMin;
  SearchSpace space;
  std::vector<Trial> trials;
  std::string trials_table;  // format_trials_table()'s text
};

std::string render_sweep_report(const SweepReportInputs& in);
// Written atomically (temp file, fsync, rename).
void write_sweep_report(const std::filesystem::path& path, const SweepReportInputs& in);

}  // namespace hwt::sweep
