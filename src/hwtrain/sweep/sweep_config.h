// The [sweep] table of a sweep file: what to search (the space), how (sampler, pruner, budget,
// parallelism) and for what (objective, direction), read from TOML plus `--set sweep.key=value`
// overrides and validated once, with one-line ConfigErrors naming the file, the key, the value found
// and what would be valid.
// It does not know hwtrain's config keys or metric names (the caller passes them: SweepKeyChecks),
// does not read the base config, and does not build samplers or pruners (sweep_components.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "hwtrain/core/metric_goal.h"
#include "hwtrain/sweep/asha_pruner.h"
#include "hwtrain/sweep/median_pruner.h"
#include "hwtrain/sweep/search_space.h"
#include "hwtrain/sweep/tpe_sampler.h"

namespace hwt::sweep {

enum class SamplerKind { kGrid, kRandom, kTpe };
enum class PrunerKind { kNone, kMedian, kAsha };

}  // namespace hwt::sweep

namespace hwt {
template <>
struct EnumNames<sweep::SamplerKind> {
  static constexpr std::array<std::pair<sweep::SamplerKind, const char*>, 3> table{{
      {sweep::SamplerKind::kGrid, "grid"},
      {sweep::SamplerKind::kRandom, "random"},
      {sweep::SamplerKind::kTpe, "tpe"}}};
};
template <>
struct EnumNames<sweep::PrunerKind> {
  static constexpr std::array<std::pair<sweep::PrunerKind, const char*>, 3> table{{
      {sweep::PrunerKind::kNone, "none"},
      {sweep::PrunerKind::kMedian, "median"},
      {sweep::PrunerKind::kAsha, "asha"}}};
};
}  // namespace hwt

namespace hwt::sweep {

using Direction = MetricGoal;  // min | max (core/metric_goal.h)


struct SweepConfig {
  // The sweep file read (empty when parsed from text without one); relative paths below resolve
  // against its directory, so a sweep runs the same from any working directory.
  std::filesystem::path sweep_file;
  // The study file (SQLite), absolute. Default "sweep.db" next to the sweep file.
  std::filesystem::path study;
  // The hwtrain train config every trial starts from, absolute; empty = hwtrain's defaults.
  std::filesystem::path base_config;
  // Where trials/<number>/ (each trial's --out), trials.txt and best.toml go, absolute.
  // Default: next to the study, named after its stem (sweep.db -> sweep/), so two studies in one
  // directory never share trial directories.
  std::filesystem::path out_dir;
  // Trials created in the study (every state counts; a retry of an interrupted trial creates none).
  // 16: enough for TPE to leave its 10 random startup trials behind, few enough for a first sweep.
  int trials = 16;
  // Seconds after which no new trial starts (running ones finish); 0 = no limit. Counted from the
  // start of each run: a resumed sweep gets the whole budget again.
  double time_budget_seconds = 0.0;
  // TPE: the best of the three on a budget of tens of trials; grid for exhaustive small spaces.
  SamplerKind sampler = SamplerKind::kTpe;
  // none: every trial runs to the end, the result does not depend on timing between trials.
  PrunerKind pruner = PrunerKind::kNone;
  std::uint64_t seed = 0;  // the study seed; trial n samples with trial_seed(seed, n)
  // Trials run at once: 0 = decide_trial_parallelism's choice for the machine.
  int parallel = 0;
  // A metric of metrics.jsonl: an eval record's (val_loss, val_perplexity) or a step record's (loss).
  std::string objective = "val_loss";
  Direction direction = Direction::kMin;
  // 0 = the trial's last reported value is its objective; k > 0 = its value at step k.
  std::int64_t at_step = 0;
  AshaPrunerOptions asha;      // [sweep.asha]: used when pruner = "asha"
  MedianPrunerOptions median;  // [sweep.median]: used when pruner = "median"
  TpeOptions tpe;              // [sweep.tpe]: used when sampler = "tpe"
  SearchSpace space;           // [sweep.space."<config key>"], in file order
};

// What the caller knows about hwtrain that this area does not.
struct SweepKeyChecks {
  // Whether `key` ("train.lr") is a key of hwtrain's train config; empty = every key is accepted.
  std::function<bool(const std::string&)> is_config_key;
  // Every config key, for "did you mean" suggestions.
  std::vector<std::string> all_config_keys;
  // Metric names the objective may name (hwtrain's available_metric_names()); empty = any name.
  std::vector<std::string> metric_names;
};

// Parses `toml_text` (the sweep file's content; `sweep_file` names it in messages and anchors
// relative paths; may be empty, then paths are relative to the working directory), applies
// `overrides` ("sweep.trials=8", "sweep.asha.min_resource=100": the value is read as a TOML value,
// else as a string) and validates everything. Throws ConfigError.
SweepConfig parse_sweep_config(const std::string& toml_text, const std::filesystem::path& sweep_file,
                               const std::vector<std::string>& overrides, const SweepKeyChecks& checks);

// Reads `sweep_file` (IoError naming it when it cannot) and parses it as above.
SweepConfig load_sweep_config(const std::filesystem::path& sweep_file, const std::vector<std::string>& overrides,
                              const SweepKeyChecks& checks);

}  // namespace hwt::sweep
