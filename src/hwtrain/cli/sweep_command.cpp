// `hwtrain sweep --config sweep.toml`: a hyperparameter search whose trials are `hwtrain train` runs
// in child processes (src/hwtrain/sweep/). This file binds the search to hwtrain: the space's keys
// and values are checked against the run config before any trial starts, the machine decides how
// many trials run at once and with how many threads (run/sweep_binding.h), and each trial is this
// binary's train command.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <toml++/toml.h>

#include "hwtrain/cli/commands.h"
#include "hwtrain/core/files.h"
#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/run/run_config.h"
#include "hwtrain/run/sweep_binding.h"
#include "hwtrain/sweep/search_space.h"
#include "hwtrain/sweep/sweep_components.h"
#include "hwtrain/sweep/sweep_outputs.h"
#include "hwtrain/sweep/sweep_report.h"
#include "hwtrain/sweep/sweep_runner.h"

namespace hwt::cli {

namespace {

namespace fs = std::filesystem;
using sweep::SweepConfig;

struct SweepArgs {
  std::string sweep_file;
  std::vector<std::string> overrides;
};

// What every trial's command sets, whatever the base config says (trial_command).
const std::vector<std::string> kSetPerTrial = {"optimization.intra_op_threads", "log.progress", "log.flush_seconds"};

sweep::TrialCommand trial_command(const SweepConfig& config) {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  return [self, base = config.base_config](const sweep::Trial& trial, const fs::path& dir, const sweep::Slot& slot) {
    sweep::TrialLaunch launch;
    launch.argv = {self.string(), "train"};
    if (!base.empty()) launch.argv.insert(launch.argv.end(), {"--config", base.string()});
    for (const auto& [key, value] : trial.params) {
      launch.argv.insert(launch.argv.end(), {"--set", key + "=" + sweep::to_override_value(value)});
    }
    launch.argv.insert(launch.argv.end(), {"--set", "optimization.intra_op_threads=" + std::to_string(slot.threads),
                                           "--set", "log.progress=lines", "--out", dir.string(), "--overwrite"});
    // The pruner reads metrics.jsonl as it grows: flushed every second, not every 10.
    if (!trial.params.count("log.flush_seconds")) {
      launch.argv.insert(launch.argv.end(), {"--set", "log.flush_seconds=1"});
    }
    launch.env.emplace_back("OMP_NUM_THREADS", std::to_string(slot.threads));
    if (slot.gpu >= 0) {
      const char* mask = std::getenv("CUDA_VISIBLE_DEVICES");  // slots count the GPUs this process sees
      launch.env.emplace_back("CUDA_VISIBLE_DEVICES", trial_visible_device(slot.gpu, mask));
    }
    return launch;
  };
}

sweep::TrialParallelism machine_parallelism(const SweepConfig& config, const RunConfig& base, int trials_left) {
  DetectOptions quick;
  quick.run_gemm_benchmark = false;
  std::string note;
  const auto in = sweep_parallelism_inputs(detect_hardware(quick), base, config.parallel, trials_left, &note);
  if (!note.empty()) log_info("sweep: {}", note);
  return sweep::decide_trial_parallelism(in);
}

// Trials this run may still start: those never created, and the interrupted ones (or running ones of
// a dead process) that the store retries once; they size how many run at once.
int trials_left(const std::vector<sweep::Trial>& trials, int max_trials) {
  int left = std::max(0, max_trials - static_cast<int>(trials.size()));
  for (const auto& t : trials) {
    const bool retried = t.state == sweep::TrialState::kInterrupted || t.state == sweep::TrialState::kRunning;
    if (retried && t.attempts < 2) ++left;
  }
  return left;
}

int run_sweep(const SweepArgs& args) {
  init_logging();
  const SweepConfig config = sweep::load_sweep_config(args.sweep_file, args.overrides, sweep_key_checks());
  const RunConfig base = load_run_config(config.base_config.string(), {});  // a bad base fails now, not per trial
  check_space_values(config, base);
  check_objective_reported(config, base);
  fs::create_directories(config.study.parent_path());  // a study in a new folder, as out_dir is
  sweep::StudyStore store =
      sweep::StudyStore::open(config.study.string(), sweep::make_study_info(config, kSetPerTrial));
  const auto sampler = sweep::make_sampler(config);
  const auto pruner = sweep::make_pruner(config);
  const std::vector<sweep::Trial> existing = store.trials();
  const int done = static_cast<int>(existing.size());
  const sweep::TrialParallelism parallelism = machine_parallelism(config, base, trials_left(existing, config.trials));
  log_info("sweep: {} of {} trials exist in {}; {} trial(s) at once, {} thread(s) each", done, config.trials,
           config.study.string(), parallelism.trials_at_once, parallelism.threads_per_trial);
  sweep::SweepRunnerOptions options;
  options.log = [](const std::string& line) { log_info(line.rfind("sweep", 0) == 0 ? "{}" : "sweep: {}", line); };
  sweep::SweepRunner runner(config, store, *sampler, pruner.get(), parallelism, trial_command(config), options);
  const sweep::SweepResult result = runner.run();
  const std::string table = sweep::format_trials_table(result.trials, config.objective, config.direction, result.seconds);
  std::cout << table;
  fs::create_directories(config.out_dir);
  write_file_atomic(config.out_dir / "trials.txt", table);
  sweep::write_sweep_report(config.out_dir / "report.html",
                            {config.study.string(), config.objective, config.direction, config.space, result.trials, table});
  if (result.best) {
    const fs::path best = config.out_dir / "best.toml";
    // A choice is written as the run's config types it: what `--set key=literal` gave the trial.
    const auto is_text = [&base](const std::string& key, const std::string& literal) {
      RunConfig typed = base;
      typed.apply_override(key + "=" + literal);
      const toml::table t = toml::parse(typed.to_toml());
      const toml::node* n = t.at_path(key).node();
      return n && n->is_string();
    };
    sweep::write_best_config(best, config.base_config, result.best->params,
                             "best trial " + std::to_string(result.best->number) + " of study " + config.study.string(),
                             is_text);
    std::cout << "best config: " << best.string() << " (hwtrain train --config " << best.string() << ")\n";
  }
  if (result.interrupted) {
    std::cerr << "sweep stopped: " << result.stop_reason << "; run the same command again to resume\n";
    return 130;
  }
  return result.best ? 0 : 1;
}

}  // namespace

Command add_sweep(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "search hyperparameters: trials are hwtrain train runs, the study "
                                              "lives in SQLite and resumes when run again");
  cmd->add_option("--config", args->sweep_file, "sweep file ([sweep] table and [sweep.space.\"key\"] tables)")
      ->required();
  cmd->add_option("--set", args->overrides, "override a key of the [sweep] table, e.g. --set sweep.trials=8");
  cmd->footer(
      "Example sweep.toml:\n"
      "  [sweep]\n  base_config = \"run.toml\"\n  trials = 16\n  sampler = \"tpe\"       # grid | random | tpe\n"
      "  pruner = \"median\"     # none | median | asha\n  objective = \"val_loss\"\n"
      "  [sweep.space.\"train.lr\"]\n  type = \"log_uniform\"  # uniform | log_uniform | int | choice\n"
      "  low = 1e-4\n  high = 3e-3\n");
  return {cmd, [args] { return run_sweep(*args); }};
}

}  // namespace hwt::cli
