#include "hwtrain/dist/liveness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "hwtrain/core/files.h"

namespace hwt {

namespace fs = std::filesystem;

std::unique_ptr<LivenessBeacon> LivenessBeacon::from_environment(int rank, std::chrono::milliseconds timeout) {
  const char* dir = std::getenv(kLivenessDirEnv);
  if (!dir || !*dir) return nullptr;
  return std::make_unique<LivenessBeacon>(fs::path(dir) / ("rank-" + std::to_string(rank)), timeout);
}

LivenessBeacon::LivenessBeacon(fs::path file, std::chrono::milliseconds timeout, std::chrono::milliseconds interval)
    : file_(std::move(file)), interval_(interval) {
  // Written once (atomically: the launcher never reads half a number); touched from then on.
  write_file_atomic(file_, "timeout_ms " + std::to_string(timeout.count()) + "\n");
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) touch();
  });
}

LivenessBeacon::~LivenessBeacon() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LivenessBeacon::touch() const {
  // Failure (the launcher removed the directory at its end) is harmless: nobody is watching.
  (void)::utimensat(AT_FDCWD, file_.c_str(), nullptr, 0);
}

bool process_is_stopped(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'T' || state == 't';
}

LivenessWatch::LivenessWatch(fs::path dir, std::chrono::milliseconds margin)
    : dir_(std::move(dir)), margin_(margin) {}

namespace {

// The dist.timeout a beacon wrote, or -1 when the file is missing or not (yet) complete.
long long read_timeout_ms(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  long long ms = -1;
  if (!(in >> word >> ms) || word != "timeout_ms" || ms <= 0) return -1;
  return ms;
}

}  // namespace

std::optional<std::pair<int, std::string>> LivenessWatch::check(const std::map<int, pid_t>& running_ranks) {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return std::nullopt;
  next_check_ = now + std::chrono::milliseconds(500);
  for (const auto& [rank, pid] : running_ranks) {
    const fs::path file = dir_ / ("rank-" + std::to_string(rank));
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) continue;
    const long long timeout_ms = read_timeout_ms(file);
    if (timeout_ms < 0) continue;
    struct timespec wall {};
    ::clock_gettime(CLOCK_REALTIME, &wall);
    const double silent = static_cast<double>(wall.tv_sec - st.st_mtim.tv_sec) +
                          static_cast<double>(wall.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
    const double limit = static_cast<double>(timeout_ms + margin_.count()) / 1000.0;
    if (silent <= limit) continue;
    std::ostringstream why;
    why << "rank " << rank << " (pid " << pid << ") "
        << (process_is_stopped(pid) ? "is stopped (SIGSTOP or a debugger) and " : "")
        << "has shown no sign of life for " << static_cast<int>(silent) << " s, more than dist.timeout "
        << static_cast<double>(timeout_ms) / 1000.0 << " s + " << static_cast<double>(margin_.count()) / 1000.0
        << " s";
    return std::make_pair(rank, why.str());
  }
  return std::nullopt;
}

}  // namespace hwt
