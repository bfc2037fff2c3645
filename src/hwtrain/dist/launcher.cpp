#include "hwtrain/dist/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <optional>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/liveness.h"
#include "hwtrain/obs/log.h"

extern char** environ;

namespace hwt {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};
int g_signal_pipe[2] = {-1, -1};  // written by the handler, read by the poll loop
std::mutex g_launch_mutex;        // one launch per process: the handler and pipe are global
pid_t g_launcher_pid = 0;          // the handler's process; a rank between fork and exec is another

void on_signal(int sig) {
  const int saved = errno;
  if (::getpid() != g_launcher_pid) {  // a rank not yet exec'd (it inherited the handler and the pipe):
    ::signal(sig, SIG_DFL);            // it dies of the signal as after exec, and the launcher does not
    ::raise(sig);                      // take its SIGTERM for one sent to itself
    errno = saved;
    return;
  }
  const unsigned char c = static_cast<unsigned char>(sig);
  (void)!::write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

// Installs the forwarding handlers for the duration of a launch.
class SignalForwarding {
 public:
  SignalForwarding() {
    g_launcher_pid = ::getpid();
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw IoError(std::string("hwtrain launch: cannot create a pipe: ") + std::strerror(errno));
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < std::size(kForwardedSignals); ++i) sigaction(kForwardedSignals[i], &sa, &saved_[i]);
  }
  ~SignalForwarding() {
    for (size_t i = 0; i < std::size(kForwardedSignals); ++i) sigaction(kForwardedSignals[i], &saved_[i], nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }

 private:
  struct sigaction saved_[std::size(kForwardedSignals)];
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr read ends
  std::string partial[2];
  bool running = true;
  int status = 0;
  // Readable once the rank has exited (Linux 5.3+; -1 elsewhere): the poll wakes for the exit
  // itself, so a failing rank is collected before the ranks it takes down with it.
  int pidfd = -1;
};

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string describe_status(int rank, int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "rank " + std::to_string(rank) + " was killed by signal " + std::to_string(sig) + " (" +
           ::strsignal(sig) + ")";
  }
  return "rank " + std::to_string(rank) + " exited with code " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

// Starts one rank. Only async-signal-safe calls happen between fork and exec.
void start(Child& child, const std::vector<std::string>& command, const std::vector<std::string>& env) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw IoError(std::string("hwtrain launch: cannot create a pipe: ") + std::strerror(errno));
  }
  std::vector<char*> argv, envp;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw IoError(std::string("hwtrain launch: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the launcher died before the line above
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    for (int sig : kForwardedSignals) ::signal(sig, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    const char msg[] = "hwtrain launch: cannot execute the command\n";
    (void)!::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: whichever runs first, the group exists before any kill
  ::close(out[1]);
  ::close(err[1]);
  child.pid = pid;
  child.fds[0] = out[0];
  child.fds[1] = err[0];
#ifdef SYS_pidfd_open
  child.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#endif
}

void signal_group(const Child& c, int sig) {
  if (c.pid > 0) ::kill(-c.pid, sig);
}

// A private directory for the ranks' liveness files, removed when the launch ends.
class LivenessDir {
 public:
  LivenessDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "hwtrain-launch-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) {
      throw IoError("hwtrain launch: cannot create a directory like " + pattern + ": " + std::strerror(errno));
    }
    path_ = pattern;
  }
  ~LivenessDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Collects the ranks that exited; the first failure becomes the result.
void reap(std::vector<Child>& children, LaunchResult& result, const std::function<void(int)>& stop_all) {
  for (auto& c : children) {
    if (!c.running || ::waitpid(c.pid, &c.status, WNOHANG) != c.pid) continue;
    c.running = false;
    if (c.pidfd >= 0) ::close(c.pidfd);
    c.pidfd = -1;
    // After a forwarded signal, a rank exiting 128 + it (checkpoint written, or killed by it) stopped as asked.
    const int code = exit_code_of(c.status);
    if (code != 0 && result.interrupted_by != 0 && code == 128 + result.interrupted_by) continue;
    if (code != 0 && result.failed_rank < 0) {
      result.failed_rank = c.rank;
      result.exit_code = code;
      result.reason = describe_status(c.rank, c.status);
      stop_all(SIGTERM);  // also after an interrupt: a failed rank leaves the others nobody to finish with
    }
  }
}

// A frozen rank (stale liveness file) is killed and the others stopped, as if it had failed.
void stop_frozen(std::vector<Child>& children, LivenessWatch& watch, LaunchResult& result,
                 const std::function<void(int)>& stop_all) {
  if (result.failed_rank >= 0) return;
  std::map<int, pid_t> running;
  for (const auto& c : children) {
    if (c.running) running[c.rank] = c.pid;
  }
  const auto frozen = watch.check(running);
  if (!frozen) return;
  result.failed_rank = frozen->first;
  result.exit_code = 124;
  result.reason = frozen->second;
  for (const auto& c : children) {
    if (c.rank == frozen->first) signal_group(c, SIGKILL);
  }
  stop_all(SIGTERM);
}

}  // namespace

void LaunchOptions::validate() const {
  auto bad = [](const std::string& what) { throw ConfigError("hwtrain launch: " + what); };
  if (nproc_per_node < 1) bad("--nproc-per-node " + std::to_string(nproc_per_node) + " must be at least 1");
  if (nnodes < 1) bad("--nnodes " + std::to_string(nnodes) + " must be at least 1");
  if (node_rank < 0 || node_rank >= nnodes) {
    bad("--node-rank " + std::to_string(node_rank) + " must be in [0, " + std::to_string(nnodes - 1) + "]");
  }
  if (master_port < 1 || master_port > 65535) bad("--master-port " + std::to_string(master_port) + " must be in [1, 65535]");
  if (master_addr.empty()) bad("--master-addr must not be empty");
  if (nnodes > 1 && (master_addr == "localhost" || master_addr.rfind("127.", 0) == 0)) {
    bad("--nnodes " + std::to_string(nnodes) + " needs --master-addr set to node 0's address (not " + master_addr + ")");
  }
  if (grace_seconds < 0) bad("the grace period must not be negative");
  if (liveness_margin_seconds < 0) bad("the liveness margin must not be negative");
  if (command.empty()) bad("no command to run; put it after '--', e.g. hwtrain launch --nproc-per-node 2 -- train");
}

std::map<std::string, std::string> rank_environment(const LaunchOptions& o, int local_rank) {
  return {{kLauncherPrefixesEnv, "1"},
          {"RANK", std::to_string(o.node_rank * o.nproc_per_node + local_rank)},
          {"WORLD_SIZE", std::to_string(o.nnodes * o.nproc_per_node)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
          {"GROUP_RANK", std::to_string(o.node_rank)},
          {"MASTER_ADDR", o.master_addr},
          {"MASTER_PORT", std::to_string(o.master_port)}};
}

namespace {

std::map<std::string, std::string> inherited_environment(const LaunchOptions& options) {
  std::map<std::string, std::string> inherited;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) inherited[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : options.env) inherited[k] = v;
  return inherited;
}

// Starts every local rank; if one cannot be started, kills those that were.
void start_all(std::vector<Child>& children, const LaunchOptions& options,
               const std::map<std::string, std::string>& inherited) {
  for (int local = 0; local < options.nproc_per_node; ++local) {
    auto env_map = inherited;
    for (const auto& [k, v] : rank_environment(options, local)) env_map[k] = v;
    std::vector<std::string> env;
    for (const auto& [k, v] : env_map) env.push_back(k + "=" + v);
    children[local].rank = options.node_rank * options.nproc_per_node + local;
    try {
      start(children[local], options.command, env);
    } catch (...) {
      for (auto& c : children) signal_group(c, SIGKILL);
      for (auto& c : children) {
        if (c.pid > 0) ::waitpid(c.pid, nullptr, 0);
        for (int fd : {c.fds[0], c.fds[1], c.pidfd}) {
          if (fd >= 0) ::close(fd);
        }
      }
      throw;
    }
  }
}

// Passes on the complete lines of a rank's stream, prefixed; `final` also the rest.
void emit(Child& c, int stream, bool final, const LineSink& sink) {
  std::string& buf = c.partial[stream];
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    sink(stream == 1, "[rank " + std::to_string(c.rank) + "] " + buf.substr(start, nl - start));
  }
  buf.erase(0, start);
  if ((final || buf.size() > 65536) && !buf.empty()) {
    sink(stream == 1, "[rank " + std::to_string(c.rank) + "] " + buf);
    buf.clear();
  }
}

// Waits up to 50 ms for output or a forwarded signal, and handles what came. Returns false when
// every rank's output is closed.
bool pump(std::vector<Child>& children, const LineSink& sink, const std::function<void(int)>& forward) {
  std::vector<pollfd> fds{{g_signal_pipe[0], POLLIN, 0}};
  std::vector<std::pair<size_t, int>> owners{{0, -1}};
  for (size_t i = 0; i < children.size(); ++i) {
    for (int s = 0; s < 2; ++s) {
      if (children[i].fds[s] >= 0) {
        fds.push_back({children[i].fds[s], POLLIN, 0});
        owners.emplace_back(i, s);
      }
    }
  }
  const size_t outputs = fds.size();
  for (const auto& c : children) {
    if (c.running && c.pidfd >= 0) fds.push_back({c.pidfd, POLLIN, 0});  // reap() collects the exit
  }
  ::poll(fds.data(), fds.size(), 50);
  if (fds[0].revents & POLLIN) {
    unsigned char sig;
    while (::read(g_signal_pipe[0], &sig, 1) == 1) forward(sig);
  }
  for (size_t j = 1; j < outputs; ++j) {
    if (!(fds[j].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Child& c = children[owners[j].first];
    const int s = owners[j].second;
    char buf[8192];
    ssize_t n = ::read(c.fds[s], buf, sizeof buf);
    if (n > 0) {
      c.partial[s].append(buf, static_cast<size_t>(n));
      emit(c, s, false, sink);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      emit(c, s, true, sink);
      ::close(c.fds[s]);
      c.fds[s] = -1;
    }
  }
  return outputs > 1;
}

}  // namespace

LaunchResult launch(const LaunchOptions& options, const LineSink& sink_arg) {
  options.validate();
  std::lock_guard<std::mutex> one_at_a_time(g_launch_mutex);
  const LineSink sink = sink_arg ? sink_arg : [](bool is_stderr, const std::string& line) {
    write_all(is_stderr ? STDERR_FILENO : STDOUT_FILENO, line + "\n");
  };
  std::map<std::string, std::string> inherited = inherited_environment(options);
  SignalForwarding forwarding;
  LivenessDir liveness_dir;
  LivenessWatch watch(liveness_dir.path(), std::chrono::milliseconds(static_cast<int64_t>(
                                               options.liveness_margin_seconds * 1000.0)));
  inherited[kLivenessDirEnv] = liveness_dir.path().string();
  std::vector<Child> children(options.nproc_per_node);
  LaunchResult result;
  std::optional<Clock::time_point> kill_at;  // SIGKILL whoever is left then
  std::function<void(int)> stop_all = [&](int sig) {
    for (const auto& c : children) {
      if (c.running) signal_group(c, sig);
    }
    if (!kill_at) {
      kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(options.grace_seconds));
    }
  };
  // A signal to the launcher goes to every rank, which stops as it would alone; a second one kills.
  std::function<void(int)> forward = [&](int sig) {
    for (const auto& c : children) {
      if (c.running) signal_group(c, sig);
    }
    if (result.interrupted_by == 0) {
      result.interrupted_by = sig;
    } else {
      kill_at = Clock::now();
    }
  };
  start_all(children, options, inherited);

  std::optional<Clock::time_point> all_exited_at;
  // Done when every rank has exited and its output is drained (or, if something it started
  // still holds the pipes open, a moment after).
  while (!all_exited_at || Clock::now() - *all_exited_at <= std::chrono::seconds(1)) {
    const bool output_open = pump(children, sink, forward);
    reap(children, result, stop_all);
    stop_frozen(children, watch, result, stop_all);
    bool any_running = false;
    for (const auto& c : children) any_running = any_running || c.running;
    if (any_running && kill_at && Clock::now() >= *kill_at) {
      for (const auto& c : children) {
        if (c.running) signal_group(c, SIGKILL);
      }
    }
    if (!any_running && !all_exited_at) all_exited_at = Clock::now();
    if (all_exited_at && !output_open) break;
  }
  for (auto& c : children) {
    for (int s = 0; s < 2; ++s) {
      if (c.fds[s] < 0) continue;
      emit(c, s, true, sink);
      ::close(c.fds[s]);
    }
    result.exit_codes.push_back(exit_code_of(c.status));
    if (result.failed_rank >= 0 || result.exit_code != 0 || result.exit_codes.back() == 0) continue;
    result.exit_code = result.exit_codes.back();  // 128 + the forwarded signal
    result.reason = "the ranks stopped with it (exit status " + std::to_string(result.exit_code) + ")";
  }
  return result;
}

}  // namespace hwt
