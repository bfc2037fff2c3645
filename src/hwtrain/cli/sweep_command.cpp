// `hwtrain sweep --config sweep.toml`: a hyperparameter search whose trials are `hwtrain train` runs
// in child processes (src/hwtrain/sweep/). This file binds the search to hwtrain: the space's keys
// and values are checked against the run config (every bound and choice is applied to the base
// config before any trial starts), the objective against the metric names, the machine decides how many
// trials run at once and with how many threads, and each trial is this binary's train command.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "hwtrain/cli/commands.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/obs/metrics.h"
#include "hwtrain/run/run_config.h"
#include "hwtrain/sweep/search_space.h"
#include "hwtrain/sweep/sweep_components.h"
#include "hwtrain/sweep/sweep_outputs.h"
#include "hwtrain/sweep/sweep_report.h"
#include "hwtrain/sweep/sweep_runner.h"

namespace hwt::cli {

namespace {

namespace fs = std::filesystem;
using sweep::ParamKind;
using sweep::ParamSpec;
using sweep::SweepConfig;

struct SweepArgs {
  std::string sweep_file;
  std::vector<std::string> overrides;
};

// Every value the space can give a key must be one the run config accepts: a misspelt choice or a
// bound of the wrong type is a one-line error now, not sixteen failed trials later.
void check_space_values(const SweepConfig& config, const RunConfig& base) {
  for (const ParamSpec& p : config.space.params) {
    std::vector<std::string> values = p.choices;
    if (p.kind != ParamKind::kChoice) {
      const bool integral = p.kind == ParamKind::kInt;
      values = {sweep::to_override_value(integral ? sweep::ParamValue{static_cast<std::int64_t>(p.low)}
                                                  : sweep::ParamValue{p.low}),
                sweep::to_override_value(integral ? sweep::ParamValue{static_cast<std::int64_t>(p.high)}
                                                  : sweep::ParamValue{p.high})};
    }
    for (const std::string& v : values) {
      RunConfig probe = base;
      try {
        probe.apply_override(p.key + "=" + v);
        probe.validate();
      } catch (const ConfigError& e) {
        throw ConfigError(config.sweep_file.string() + ": sweep.space.\"" + p.key + "\" value " + v +
                          " is not valid for the run: " + e.what());
      }
    }
  }
}

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
    launch.env.emplace_back("OMP_NUM_THREADS", std::to_string(slot.threads));
    if (slot.gpu >= 0) launch.env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(slot.gpu));
    return launch;
  };
}

sweep::TrialParallelism machine_parallelism(const SweepConfig& config, int trials_left) {
  DetectOptions quick;
  quick.run_gemm_benchmark = false;
  const HardwareProfile hw = detect_hardware(quick);
  sweep::ParallelismInputs in;
  in.physical_cores = std::max(1, hw.cpu.num_physical_cores);
  for (const GpuInfo& g : hw.gpus) {
    if (!g.usable_by_torch) continue;
    ++in.num_gpus;
    in.gpu_memory_bytes = in.gpu_memory_bytes == 0 ? static_cast<uint64_t>(g.total_memory_bytes)
                                                   : std::min<uint64_t>(in.gpu_memory_bytes, g.total_memory_bytes);
  }
  in.parallel = config.parallel;
  in.max_trials = std::max(1, trials_left);
  return sweep::decide_trial_parallelism(in);
}

int run_sweep(const SweepArgs& args) {
  init_logging();
  const std::vector<std::string> keys = RunConfig::all_keys();
  const std::set<std::string> key_set(keys.begin(), keys.end());
  sweep::SweepKeyChecks checks{[&](const std::string& k) { return key_set.count(k) > 0; }, keys,
                               available_metric_names()};
  const SweepConfig config = sweep::load_sweep_config(args.sweep_file, args.overrides, checks);
  const RunConfig base = load_run_config(config.base_config.string(), {});  // a bad base fails now, not per trial
  check_space_values(config, base);
  sweep::StudyStore store = sweep::StudyStore::open(config.study.string(), sweep::make_study_info(config));
  const auto sampler = sweep::make_sampler(config);
  const auto pruner = sweep::make_pruner(config);
  const int done = static_cast<int>(store.trials().size());
  const sweep::TrialParallelism parallelism = machine_parallelism(config, config.trials - done);
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
    sweep::write_best_config(best, config.base_config, result.best->params,
                             "best trial " + std::to_string(result.best->number) + " of study " + config.study.string());
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
