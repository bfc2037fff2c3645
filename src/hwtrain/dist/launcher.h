// The process manager behind `hwtrain launch` (a small torchrun): starts one process per local
// rank with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set,
// prefixes every line they print with "[rank r] ", forwards SIGINT/SIGTERM/SIGHUP to all of them
// (they stop as they would alone; a second such signal kills them), and when one fails stops the
// others (SIGTERM, then SIGKILL after a grace period); so it does when one is frozen (its liveness
// file goes stale, see liveness.h), which the ranks cannot detect themselves when it is rank 0
// serving their store. Each rank runs in its own process group, so whatever it started is stopped
// with it, and dies with the launcher (PR_SET_PDEATHSIG), so no process is left behind. Not here:
// the CLI (cli/).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hwt {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // The program and its arguments, run once per local rank (argv[0] is the executable path).
  std::vector<std::string> command;
  // Seconds the other ranks get to exit after SIGTERM before SIGKILL.
  double grace_seconds = 10.0;
  // A rank whose liveness file (liveness.h) stays unchanged for its dist.timeout plus this many
  // seconds is taken for frozen: it is killed, the others stopped, and the launch fails with 124.
  double liveness_margin_seconds = 5.0;
  // Extra environment for every rank (on top of this process's environment).
  std::map<std::string, std::string> env;

  void validate() const;  // ConfigError naming the option
};

struct LaunchResult {
  // The first failing rank's code (128 + signal when killed; 124 when it was frozen), else 0.
  int exit_code = 0;
  int failed_rank = -1;  // that rank, -1 when all succeeded
  // "rank 1 exited with code 3" / "rank 0 was killed by signal 9 (Killed)" / "rank 0 (pid 7) is
  // stopped (SIGSTOP or a debugger) and has shown no sign of life for 66 s, ...".
  std::string reason;
  std::vector<int> exit_codes;  // of each local rank, in the same convention
  // The first signal the launcher received and forwarded (SIGINT, SIGTERM, SIGHUP), 0 if none. The
  // ranks then stop as they do on their own (a checkpoint, a sample): only a second signal kills them.
  int interrupted_by = 0;
};

// Receives each output line of a rank, already prefixed; `is_stderr` says which stream it came
// from. The default writes it to this process's stdout or stderr.
using LineSink = std::function<void(bool is_stderr, const std::string& line)>;

// Runs the ranks to completion. Throws ConfigError for invalid options and IoError when a
// process cannot be started.
LaunchResult launch(const LaunchOptions& options, const LineSink& sink = {});

// The environment of local rank `local_rank` (what launch() adds to the inherited one).
std::map<std::string, std::string> rank_environment(const LaunchOptions& options, int local_rank);

}  // namespace hwt
