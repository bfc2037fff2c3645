// Heartbeat: a thread that publishes this rank's liveness, progress and state ("running", "done",
// "failed") under the store key hwt/hb/<rank> every interval, and reads every other rank's, so a
// failed collective can be blamed on the rank that died (its beats stop), stopped (SIGSTOP, a
// hung machine: the same), failed with an error (it says so) or hangs in its own code (its beats
// go on but its progress stays behind).
//
// Only the heartbeat's own thread talks to the store, through a client of its own: a store call
// can block without bound when the rank serving it (rank 0) is frozen, so set_state() only hands
// the new state to that thread, a beat stuck for long counts as the store being down, and stop()
// waits a bounded time before leaving a stuck thread to process exit. Nothing the caller does
// ever waits on the store.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
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

  // `store`: a client of its own (Store::clone()). `progress` is read at every beat (shared, so a
  // thread left behind by stop() never reads freed memory). A peer silent for `warn_after` is
  // reported once with log_warn. The first beat is published before the constructor returns.
  Heartbeat(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size, std::chrono::milliseconds interval,
            std::chrono::milliseconds warn_after, std::shared_ptr<const std::atomic<int64_t>> progress);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // The state to publish; the heartbeat thread publishes it at once (never the caller).
  void set_state(const std::string& state);
  // Publishes the latest state one last time and ends the thread, waiting at most about two
  // intervals plus a second: a thread stuck on a frozen store is left to process exit.
  void stop();

  std::vector<Peer> peers() const;
  // Seconds the store has not answered: since the last beat that reached it, when the latest
  // failed or has been waiting for longer than two intervals plus a second; 0 otherwise.
  double store_down_seconds() const;
  std::chrono::milliseconds interval() const;

  static std::string key(int rank) { return "hwt/hb/" + std::to_string(rank); }
  // A string as the bytes a c10d store holds.
  static std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
  static std::string encode(int64_t beat, int64_t progress, const std::string& state);

 private:
  struct Core;  // everything the thread touches, shared with it
  std::shared_ptr<Core> core_;
  std::thread thread_;
};

}  // namespace hwt
