// Shared steps of the commands that train or load a model: resolving the config (with resume),
// the run directory, and the dataset.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "hwtrain/cli/commands.h"
#include "hwtrain/run/run_config.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/dist/process_group.h"

namespace hwt::cli {

// defaults -> (checkpoint's config on resume) -> --config file -> --set overrides -> --data.
// On resume the model's shape comes from the checkpoint; changing it is a ConfigError.
RunConfig resolve_config(const ConfigOptions& options, const std::optional<std::filesystem::path>& checkpoint);

// Where `latest` checkpoints are looked for: the checkpoints of the run <out>, else of runs/latest
// (<run>/checkpoints, or the run's checkpoint.dir where its config.toml sets one).
std::filesystem::path default_checkpoint_dir(const std::string& out);

// The checkpoint a --resume (or eval, generate, export) spec names: resolve_checkpoint's, where a
// run directory names the newest checkpoint of that run, in its checkpoint.dir if it set one.
std::filesystem::path resolve_run_checkpoint(const std::string& spec, const std::string& out);

// A new run directory runs/<YYYYmmdd-HHMMSS>, with runs/latest pointing at it.
std::filesystem::path new_run_dir();

// The run directory of a training command, chosen by rank 0 (every rank gets its choice): --out, the
// resumed checkpoint's run, or a new one. A checkpoint resumed into another run than the one that
// wrote it leaves that run's checkpoint.dir (unless another is set on this command): this run's go
// to <run>/checkpoints. Rank 0 decides both; every rank gets its choice.
std::filesystem::path choose_run_dir(const std::string& out, const std::optional<std::filesystem::path>& checkpoint,
                                     RunConfig& config, ProcessGroup* group);

// Prepares (or reuses) the dataset and opens it.
std::shared_ptr<const ShardedDataset> open_dataset(const RunConfig& config);
// The same on the ranks of a launch: rank 0 opens the dataset first (it may prepare it, for longer
// than dist.timeout); the others wait for it, then open the prepared files. `group` null: open_dataset.
std::shared_ptr<const ShardedDataset> open_run_dataset(const RunConfig& config, ProcessGroup* group);

}  // namespace hwt::cli
