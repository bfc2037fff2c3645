// What `train --out DIR` may do with a directory that already holds a run: continue it (with
// --resume of one of its checkpoints), replace it (--overwrite), or nothing: two runs never mix
// their metrics, configs and checkpoints in one directory. Not here: choosing a new run directory
// (run_setup.h's new_run_dir).
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace hwt::cli {

// The files and directories a training run writes into its run directory (names relative to it).
const std::vector<std::string>& run_output_names();

// Those of run_output_names() that exist in `dir` (empty when it holds no run).
std::vector<std::string> existing_run_outputs(const std::filesystem::path& dir);

// ConfigError (one line naming DIR and what it holds) when `out` holds a run and this training
// neither continues it (a --resume checkpoint inside it) nor replaces it (--overwrite); also when
// --overwrite would delete the very checkpoint being resumed. A directory holding only what a run
// writes at start-up, plan.json among it (a run that failed before its first step), is reused.
// Reads only; call before any work.
void check_out_dir(const std::filesystem::path& out, const std::optional<std::filesystem::path>& checkpoint,
                   bool overwrite);

// --overwrite: removes the old run's outputs from `dir`, by name (run_output_names(); symlinks
// are removed, never followed), leaving any other file there alone. Returns what it removed.
std::vector<std::string> clear_run_outputs(const std::filesystem::path& dir);

}  // namespace hwt::cli
