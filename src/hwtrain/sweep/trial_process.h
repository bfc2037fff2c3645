// TrialProcess: one trial's child process (POSIX fork/exec): started in its own process group with
// stdout and stderr appended to a log file, signalled as a group (so the trainer's own children stop
// with it), reaped without blocking, and described on exit ("exit code 3", "killed by SIGKILL").
// On Linux the child is SIGKILLed by the kernel when the sweep process dies (PR_SET_PDEATHSIG), so
// a killed sweep leaves no trainer writing into a directory that its retry will reuse.
// It knows nothing of trials, metrics or the study: see trial_runner.h.
#pragma once
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace hwt::sweep {

// What to run for a trial: the program and its arguments, and environment variables to set on top
// of the sweep's own environment (e.g. CUDA_VISIBLE_DEVICES=1).
struct TrialLaunch {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up on PATH
  std::vector<std::pair<std::string, std::string>> env;
};

class TrialProcess {
 public:
  // Starts `launch` with stdin from /dev/null and stdout + stderr appended to `log_path` (created).
  // Throws IoError naming the path or the program when the log cannot be opened, fork fails, or the
  // program cannot be executed (not found, not executable): a setup error, not a failed trial.
  static TrialProcess start(const TrialLaunch& launch, const std::filesystem::path& log_path);

  TrialProcess(TrialProcess&& other) noexcept;
  TrialProcess& operator=(TrialProcess&& other) noexcept;
  TrialProcess(const TrialProcess&) = delete;
  TrialProcess& operator=(const TrialProcess&) = delete;
  // A child still running is SIGKILLed (with its group) and reaped: no process outlives its owner.
  ~TrialProcess();

  // Reaps the child if it exited (never blocks); true once it has.
  bool poll();
  bool exited() const { return exited_; }
  // Sends `sig` to the child's process group (nothing once it exited).
  void signal_group(int sig);

  pid_t pid() const { return pid_; }
  // After exit: whether it exited with code 0, and "exit code N" / "killed by SIGTERM (signal 15)".
  bool succeeded() const;
  std::string describe_exit() const;

 private:
  explicit TrialProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;  // waitpid status, valid once exited_
};

}  // namespace hwt::sweep
