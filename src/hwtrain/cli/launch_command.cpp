// `hwtrain launch`: starts N ranks of an hwtrain command on this node, like torchrun
// (process management in dist/launcher.h). Each rank is this same binary with RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set.
#include <unistd.h>

#include <climits>
#include <cstring>
#include <iostream>

#include "hwtrain/cli/commands.h"
#include "hwtrain/core/error.h"
#include "hwtrain/dist/launcher.h"

namespace hwt::cli {

namespace {

std::string this_executable() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw IoError("hwtrain launch: cannot resolve /proc/self/exe to start the ranks");
  return std::string(path, static_cast<size_t>(n));
}

int run_launch(LaunchOptions options, const std::vector<std::string>& command) {
  options.command = {this_executable()};
  options.command.insert(options.command.end(), command.begin(), command.end());
  LaunchResult result = launch(options);
  if (result.exit_code != 0 && result.interrupted_by != 0) {
    std::cerr << "hwtrain launch: interrupted by SIG" << ::sigabbrev_np(result.interrupted_by)
              << ", forwarded to every rank; " << result.reason << "\n";
  } else if (result.exit_code != 0) {
    std::cerr << "hwtrain launch: " << result.reason << "; the other ranks were stopped\n";
  }
  return result.exit_code;
}

}  // namespace

Command add_launch(CLI::App& app) {
  auto options = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand("launch", "run an hwtrain command as several data-parallel ranks (like torchrun)");
  cmd->add_option("--nproc-per-node", options->nproc_per_node, "ranks to start on this node")->capture_default_str();
  cmd->add_option("--nnodes", options->nnodes, "nodes in the run")->capture_default_str();
  cmd->add_option("--node-rank", options->node_rank, "this node's index, 0..nnodes-1")->capture_default_str();
  cmd->add_option("--master-addr", options->master_addr, "address of node 0 (rank 0 serves the rendezvous)")
      ->capture_default_str();
  cmd->add_option("--master-port", options->master_port, "TCP port of the rendezvous on node 0")->capture_default_str();
  cmd->add_option("--grace", options->grace_seconds,
                  "seconds the other ranks get to stop after one fails (a signal to the launcher is forwarded "
                  "and waits for the ranks; a second one kills them)")
      ->capture_default_str();
  // The ranks' command: everything after "--", or from the first word that is not a launch
  // option on (positionals_at_end: the command's own options are not parsed here).
  auto command = std::make_shared<std::vector<std::string>>();
  cmd->add_option("command", *command, "the hwtrain command each rank runs, e.g. -- train --set k=v");
  cmd->positionals_at_end();
  cmd->footer(
      "Examples:\n"
      "  hwtrain launch --nproc-per-node 2 -- train --set train.max_steps=200\n"
      "  # two nodes: run on each, with its own --node-rank\n"
      "  hwtrain launch --nnodes 2 --node-rank 0 --nproc-per-node 4 --master-addr 10.0.0.1 -- train --config run.toml\n"
      "Without the launcher, hwtrain train also runs under torchrun, srun or mpirun unchanged.\n");
  return {cmd, [options, command] {
            std::vector<std::string> args = *command;
            if (!args.empty() && args.front() == "--") args.erase(args.begin());
            if (args.empty()) {
              throw ConfigError("hwtrain launch: no command to run; e.g. hwtrain launch --nproc-per-node 2 -- train");
            }
            return run_launch(*options, args);
          }};
}

}  // namespace hwt::cli
