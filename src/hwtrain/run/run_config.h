// RunConfig: every option of a run, one table per area, resolved in this order:
// defaults -> model preset -> TOML file (--config) -> command-line overrides (--set key=value).
// Unknown keys and wrong types are ConfigErrors that name the key and suggest the closest one.
// The keys a user set explicitly are remembered: the planner never overrides those.
#pragma once
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/data/data_config.h"
#include "hwtrain/dist/dist_config.h"
#include "hwtrain/io/checkpoint_config.h"
#include "hwtrain/model/model_config.h"
#include "hwtrain/obs/obs_config.h"
#include "hwtrain/plan/optimization_config.h"
#include "hwtrain/train/callback_config.h"
#include "hwtrain/train/train_config.h"

namespace hwt {

struct RunConfig {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  CheckpointConfig checkpoint;
  OptimizationConfig optimization;
  ObsConfig log;
  DistConfig dist;
  EarlyStoppingConfig early_stopping;
  LrPlateauConfig lr_plateau;
  LrMonitorConfig lr_monitor;

  // Keys ("train.micro_batch_size") given by the user in a file or on the command line.
  std::set<std::string> explicit_keys;
  // Deprecated keys that were read (and what they were read as), for the CLI to warn about.
  std::vector<std::string> deprecations;
  // Alias keys that were read (optimization.amp_level) and the keys they set, for the CLI to print.
  std::vector<std::string> alias_notes;
  bool is_set(const std::string& key) const { return explicit_keys.count(key) > 0; }

  // Visits every table: v.table(name, struct).
  template <class V>
  void visit_tables(V& v) {
    v.table("model", model);
    v.table("data", data);
    v.table("train", train);
    v.table("checkpoint", checkpoint);
    v.table("optimization", optimization);
    v.table("log", log);
    v.table("dist", dist);
    v.table("early_stopping", early_stopping);
    v.table("lr_plateau", lr_plateau);
    v.table("lr_monitor", lr_monitor);
  }

  // Applies the TOML text `toml_text` (from `source`, used in messages).
  void apply_toml(const std::string& toml_text, const std::string& source);
  // Applies one "key=value" override from the command line.
  void apply_override(const std::string& assignment);
  // Applies a named model preset (sets n_layer, n_head, n_embd, block_size unless set explicitly).
  void apply_model_preset(const std::string& name);

  // Range and cross-field checks; throws ConfigError naming the key and the valid range.
  void validate() const;

  // The resolved config as TOML (printed at start, saved with checkpoints) and as JSON.
  std::string to_toml() const;
  std::string to_json() const;
  // The same TOML with each key's description (and valid choices) as a comment above it: what
  // --help-config prints, and a config file to start from.
  std::string to_documented_toml() const;

  // Every valid key, for messages and docs.
  static std::vector<std::string> all_keys();
};

// Loads defaults, then `config_file` (if not empty), then `overrides`, then validates.
RunConfig load_run_config(const std::string& config_file, const std::vector<std::string>& overrides);

}  // namespace hwt
