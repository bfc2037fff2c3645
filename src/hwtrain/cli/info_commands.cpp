// `hwtrain doctor`, `hwtrain plan` and `hwtrain report`: look at the machine, plan without
// training (also for machines described in a file or a preset), and rebuild a run's report.
#include <cstdio>
#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/cli/parallel_setup.h"
#include "hwtrain/cli/run_setup.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/default_corpus.h"
#include "hwtrain/data/tokenizer.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/hw/doctor.h"
#include "hwtrain/hw/hardware_preset.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/obs/report.h"
#include "hwtrain/run/run_bindings.h"

namespace hwt::cli {

namespace {

struct PlanArgs {
  ConfigOptions config;
  std::string hardware_file, preset;
  int64_t gpus_per_node = 1, nodes = 1;
  bool counts_given = false;  // --gpus or --nodes on the command line
  bool json = false;
};

// The machine flags that go together: --gpus and --nodes describe a --preset, which a --hardware
// file would contradict; the counts are bounded (the layout search's tables grow with the GPUs).
void check_machine_flags(const PlanArgs& a) {
  if (!a.preset.empty() && !a.hardware_file.empty()) {
    throw ConfigError("plan: --preset " + a.preset + " and --hardware " + a.hardware_file +
                      " each describe the machine: give one");
  }
  if (a.counts_given && a.preset.empty()) {
    throw ConfigError("plan: --gpus and --nodes describe a --preset machine; add --preset (one of " +
                      join(hardware_preset_names()) + ")");
  }
}

// The machine a plan is for: a preset, a described one (both "paper" machines) or this one.
HardwareProfile plan_hardware(const PlanArgs& a, bool& paper) {
  paper = !a.preset.empty() || !a.hardware_file.empty();
  if (!a.preset.empty()) {
    auto p = hardware_preset(a.preset, static_cast<int>(a.gpus_per_node * a.nodes), static_cast<int>(a.nodes));
    if (!p) {
      throw ConfigError("--preset '" + a.preset + "' is unknown: expected one of " + join(hardware_preset_names()) +
                        did_you_mean(a.preset, hardware_preset_names()));
    }
    return *p;
  }
  if (!a.hardware_file.empty()) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(a.hardware_file));
    } catch (const nlohmann::json::parse_error& e) {
      throw HardwareError("hardware file " + a.hardware_file + " is not valid JSON: " + e.what());
    }
    return hardware_from_json(j, a.hardware_file);
  }
  return detect_hardware();
}

int run_plan(const PlanArgs& a) {
  init_logging(-1, "warn");
  check_machine_flags(a);
  RunConfig config = resolve_config(a.config, std::nullopt);
  PlanContext ctx;
  const HardwareProfile hw = plan_hardware(a, ctx.paper);
  // The world `train` would run in: the described machine's GPUs, or this process's launch. A fixed
  // mesh is checked and planned as train plans it, so that plan refuses what train would refuse; on a
  // described machine the sizes a user left unset are searched (as "auto"), so it is fixed only when
  // dist.tensor_parallel, pipeline_parallel and pipeline_chunks are all set.
  const DistEnv env = ctx.paper ? DistEnv{} : read_dist_env();  // a described machine has no launch
  const int world = ctx.paper ? std::max(1, static_cast<int>(hw.gpus.size())) : env.world_size;
  const bool all_set = config.is_set("dist.tensor_parallel") && config.is_set("dist.pipeline_parallel") &&
                       config.is_set("dist.pipeline_chunks");
  std::optional<DeviceMesh> fixed;
  if (!ctx.paper || all_set) fixed = run_mesh_shape(config, world);
  if (!ctx.paper) ctx = mesh_plan_context(fixed, env);
  if (ctx.paper) ctx.world_size = fixed ? fixed->data_parallel() : world;
  if (ctx.paper && fixed) ctx.model_parallel = fixed->tensor_parallel() * fixed->pipeline_parallel();
  if (ctx.paper && fixed) ctx.pipeline_parallel = fixed->pipeline_parallel();
  if (config.model.vocab_size == 0) {
    config.model.vocab_size = resolve_vocab_size(config.model, data_vocab_size(config.data));
  }
  Plan plan = make_plan(hw, config, ctx);
  const DeviceMesh mesh = planned_mesh_shape(fixed, config, plan, world);
  check_plan_for_mesh(mesh, plan, planned_pipeline_chunks(config, plan));
  check_sharding_for_mesh(mesh, plan, config);
  if (a.json) {
    std::cout << plan.to_json() << "\n";
    return 0;
  }
  std::cout << "hardware (" << hw.source << "):\n" << hardware_summary(hw) << "\n";
  std::cout << "plan for " << config.model.n_layer << " layers x " << config.model.n_embd << " wide, block "
            << config.model.block_size << ", " << gpt_num_parameters(config.model) << " parameters, on " << world
            << " device(s):\n"
            << plan.to_text();
  if (!plan.layouts_considered.empty()) std::cout << "\n" << plan.layouts_text();
  return 0;
}

}  // namespace

Command add_doctor(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("doctor", "describe this machine and what slows training on it, with fixes");
  cmd->add_flag("--json", *json, "print the hardware profile as JSON");
  return {cmd, [json] {
            init_logging(-1, "warn");
            return run_doctor(*json, std::cout);
          }};
}

Command add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand("plan", "print the training plan without training");
  add_config_options(cmd, a->config);
  cmd->add_option("--hardware", a->hardware_file, "plan for the machine described in this JSON file (doctor --json)");
  cmd->add_option("--preset", a->preset, "plan for a named accelerator: " + join(hardware_preset_names()));
  CLI::Option* gpus = cmd->add_option("--gpus", a->gpus_per_node, "GPUs per node with --preset (1 to 64)")
                          ->check(CLI::Range(1, 64))
                          ->capture_default_str();
  CLI::Option* nodes = cmd->add_option("--nodes", a->nodes, "nodes with --preset (1 to 4096)")
                           ->check(CLI::Range(1, 4096))
                           ->capture_default_str();
  cmd->add_flag("--json", a->json, "print the plan as JSON");
  cmd->footer(
      "Examples:\n"
      "  hwtrain plan --set model.preset=gpt2\n"
      "  hwtrain plan --preset h100-80gb --gpus 8 --set model.n_layer=32 --set model.n_embd=4096 --set model.n_head=32\n"
      "  hwtrain plan --preset h100-80gb --gpus 8 --nodes 8 --set model.preset=llama-3.1-70b   (3D layout search)");
  return {cmd, [a, gpus, nodes] {
            a->counts_given = gpus->count() + nodes->count() > 0;
            return run_plan(*a);
          }};
}

Command add_report(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("report", "write report.html for a run directory");
  cmd->add_option("run_dir", *dir, "run directory (contains metrics.jsonl)")->required();
  return {cmd, [dir] {
            init_logging();
            std::cout << write_report_from_run_dir(*dir).string() << "\n";
            return 0;
          }};
}

}  // namespace hwt::cli
