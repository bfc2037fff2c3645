#include "hwtrain/sweep/trial_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cerrno>
#include <cstring>

#include "hwtrain/core/error.h"

extern char** environ;

namespace hwt::sweep {
namespace {

// The environment the child gets: the sweep's, with `extra` set (replacing same-named variables).
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : extra) replaced = replaced || k == name;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the forked child: only async-signal-safe calls until exec. Reports exec's errno on `err_fd`.
[[noreturn]] void exec_child(int log_fd, int err_fd, pid_t parent, char** argv, char** envp) {
  setpgid(0, 0);
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(126);  // the sweep died before prctl took effect
#endif
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  dup2(log_fd, STDOUT_FILENO);
  dup2(log_fd, STDERR_FILENO);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  execvpe(argv[0], argv, envp);
  const int e = errno;
  (void)!write(err_fd, &e, sizeof e);
  _exit(127);
}

}  // namespace

TrialProcess TrialProcess::start(const TrialLaunch& launch, const std::filesystem::path& log_path) {
  if (launch.argv.empty() || launch.argv[0].empty()) throw IoError("trial command is empty: nothing to run");
  std::vector<std::string> args = launch.argv;
  std::vector<std::string> env = child_environment(launch.env);
  std::vector<char*> argv = c_strings(args), envp = c_strings(env);

  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw IoError("cannot open " + log_path.string() + ": " + std::strerror(errno));
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(log_fd);
    throw IoError(std::string("cannot create a pipe for a trial: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(log_fd, err_pipe[1], parent, argv.data(), envp.data());
  const int fork_errno = errno;
  ::close(log_fd);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(err_pipe[0]);
    throw IoError(std::string("cannot start a trial: fork failed: ") + std::strerror(fork_errno));
  }
  ::setpgid(pid, pid);  // also here, so that the group exists before the first signal_group()
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  TrialProcess process(pid);
  if (n > 0) {
    while (::waitpid(pid, &process.status_, 0) < 0 && errno == EINTR) {
    }
    process.exited_ = true;
    throw IoError("cannot run '" + launch.argv[0] + "': " + std::strerror(exec_errno) +
                  "; check the trial command (is the program on PATH and executable?)");
  }
  return process;
}

TrialProcess::TrialProcess(TrialProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), exited_(other.exited_), status_(other.status_) {}

TrialProcess& TrialProcess::operator=(TrialProcess&& other) noexcept {
  if (this != &other) {
    this->~TrialProcess();
    pid_ = std::exchange(other.pid_, -1);
    exited_ = other.exited_;
    status_ = other.status_;
  }
  return *this;
}

TrialProcess::~TrialProcess() {
  if (pid_ <= 0 || exited_) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  exited_ = true;
}

bool TrialProcess::poll() {
  if (exited_ || pid_ <= 0) return true;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status_, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    exited_ = true;
    // The trainer's own children (data loaders, a shell's sleep) go with it.
    ::kill(-pid_, SIGKILL);
  }
  return exited_;
}

void TrialProcess::signal_group(int sig) {
  if (exited_ || pid_ <= 0) return;
  if (::kill(-pid_, sig) != 0) ::kill(pid_, sig);  // the group may not exist yet
}

bool TrialProcess::succeeded() const { return exited_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0; }

std::string TrialProcess::describe_exit() const {
  if (!exited_) return "still running";
  if (WIFEXITED(status_)) return "exit code " + std::to_string(WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) {
    const int sig = WTERMSIG(status_);
    const char* name = sig == SIGKILL ? "SIGKILL" : sig == SIGTERM ? "SIGTERM" : sig == SIGSEGV ? "SIGSEGV"
                       : sig == SIGABRT ? "SIGABRT" : sig == SIGINT ? "SIGINT" : sig == SIGBUS ? "SIGBUS" : "a signal";
    return std::string("killed by ") + name + " (signal " + std::to_string(sig) + ")" +
           (sig == SIGKILL ? "; the system may have run out of memory" : "");
  }
  return "ended with status " + std::to_string(status_);
}

}  // namespace hwt::sweep
