// Heartbeat: a thread that publishes this rank's liveness, progress and state ("running", "done",
// "failed") under the store key hwt/hb/<rank> every interval, and reads every other rank's, so a
// failed collective can be blamed on the rank that died (its beats stop), stopped (SIGSTOP, a
// hung machine: the same), failed with an error (it says so) or hangs in its own code (its beats
// go on but its progress stays behind). Uses its own store client, so blocking store calls of
// the main thread never delay it.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hwt {

class Heartbeat {
 public:
  struct Peer {
    std::string state = "absent";  // absent until its first beat is seen
    int64_t beat = -1;
    int64_t progress = 0;          // collectives it had finished at its last beat
    double silent_seconds = 0;     // since its beat last changed
  };

  // `store`: a client of its own (Store::clone()). `progress` is read at every beat.
  // A peer silent for `warn_after` is reported once with log_warn.
  Heartbeat(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size, std::chrono::milliseconds interval,
            std::chrono::milliseconds warn_after, std::function<int64_t()> progress);
  ~Heartbeat();

  // Publishes the state now (and at every later beat).
  void set_state(const std::string& state);
  void stop();

  std::vector<Peer> peers() const;
  // Seconds the store has not answered (0 when the last beat reached it).
  double store_down_seconds() const;
  std::chrono::milliseconds interval() const { return interval_; }

  static std::string key(int rank) { return "hwt/hb/" + std::to_string(rank); }
  // A string as the bytes a c10d store holds.
  static std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
  static std::string encode(int64_t beat, int64_t progress, const std::string& state);

 private:
  void run();
  void tick();

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_, world_size_;
  std::chrono::milliseconds interval_, warn_after_;
  std::function<int64_t()> progress_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string state_ = "running";
  int64_t beat_ = 0;
  std::vector<Peer> peers_;
  std::vector<std::chrono::steady_clock::time_point> last_change_;
  std::vector<bool> warned_;
  std::chrono::steady_clock::time_point last_ok_;
  bool store_ok_ = true;
  std::thread thread_;
};

}  // namespace hwt
