// Liveness files: how `hwtrain launch` stops a run whose rank is frozen, from outside it.
// The in-process heartbeat (heartbeat.h) lets the other ranks blame a dead or stopped peer, but a
// rank that cannot run at all (SIGSTOP, a machine swapping to death) cannot end itself, and when
// it is rank 0 the store the others talk through freezes with it. So the launcher gives each rank
// a directory (HWTRAIN_LIVENESS_DIR); a launched rank's LivenessBeacon thread touches
// <dir>/rank-<r> every second and writes its dist.timeout into it once. The launcher's
// LivenessWatch stops every rank when one's file has not changed for dist.timeout plus a margin,
// naming that rank ("stopped" when /proc says so, "not responding" otherwise).
#pragma once
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace hwt {

inline constexpr const char* kLivenessDirEnv = "HWTRAIN_LIVENESS_DIR";

class LivenessBeacon {
 public:
  // Started when HWTRAIN_LIVENESS_DIR is set (the rank was started by `hwtrain launch`), else null.
  static std::unique_ptr<LivenessBeacon> from_environment(int rank, std::chrono::milliseconds timeout);
  LivenessBeacon(std::filesystem::path file, std::chrono::milliseconds timeout,
                 std::chrono::milliseconds interval = std::chrono::milliseconds(1000));
  ~LivenessBeacon();
  LivenessBeacon(const LivenessBeacon&) = delete;
  LivenessBeacon& operator=(const LivenessBeacon&) = delete;

 private:
  void touch() const;
  std::filesystem::path file_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The launcher's side: watches the files of its local ranks.
class LivenessWatch {
 public:
  // `margin`: how long past a rank's dist.timeout its file may stay unchanged.
  LivenessWatch(std::filesystem::path dir, std::chrono::milliseconds margin);
  const std::filesystem::path& dir() const { return dir_; }
  // The first rank whose file is stale, with the reason ("rank 0 (pid 123) is stopped (SIGSTOP
  // or a debugger) and has shown no sign of life for 66 s, more than dist.timeout 60 s + 5 s").
  // Ranks without a file yet are not judged. Checks at most twice a second.
  std::optional<std::pair<int, std::string>> check(const std::map<int, pid_t>& running_ranks);

 private:
  std::filesystem::path dir_;
  std::chrono::milliseconds margin_;
  std::chrono::steady_clock::time_point next_check_{};
};

// 'T' / 't' in /proc/<pid>/stat: stopped by a signal or traced.
bool process_is_stopped(pid_t pid);

}  // namespace hwt
