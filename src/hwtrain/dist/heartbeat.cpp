#include "hwtrain/dist/heartbeat.h"

#include <sstream>

#include "hwtrain/obs/log.h"

namespace hwt {

using Clock = std::chrono::steady_clock;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

std::string Heartbeat::encode(int64_t beat, int64_t progress, const std::string& state) {
  return std::to_string(beat) + " " + std::to_string(progress) + " " + state;
}

Heartbeat::Heartbeat(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                     std::chrono::milliseconds interval, std::chrono::milliseconds warn_after,
                     std::function<int64_t()> progress)
    : store_(std::move(store)),
      rank_(rank),
      world_size_(world_size),
      interval_(interval),
      warn_after_(warn_after),
      progress_(std::move(progress)),
      peers_(world_size),
      last_change_(world_size, Clock::now()),
      warned_(world_size, false),
      last_ok_(Clock::now()) {
  // A dead store must not stall a beat for long.
  store_->setTimeout(interval_ * 2 + std::chrono::milliseconds(1000));
  tick();
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() { stop(); }

void Heartbeat::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::set_state(const std::string& state) {
  int64_t beat;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state_ = state;
    beat = ++beat_;
  }
  try {
    store_->set(key(rank_), bytes(encode(beat, progress_(), state)));
  } catch (const std::exception&) {
    // The store is gone (rank 0 ended); there is nobody left to tell.
  }
}

void Heartbeat::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    lock.unlock();
    tick();
    lock.lock();
  }
}

void Heartbeat::tick() {
  std::string state;
  int64_t beat;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state = state_;
    beat = ++beat_;
  }
  std::vector<std::vector<uint8_t>> values;
  try {
    store_->set(key(rank_), bytes(encode(beat, progress_(), state)));
    std::vector<std::string> keys;
    for (int r = 0; r < world_size_; ++r) keys.push_back(key(r));
    values = store_->multiGet(keys);
  } catch (const std::exception&) {
    std::lock_guard<std::mutex> lock(mutex_);
    store_ok_ = false;
    return;
  }
  const auto now = Clock::now();
  std::vector<std::string> warnings;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    store_ok_ = true;
    last_ok_ = now;
    for (int r = 0; r < world_size_ && r < static_cast<int>(values.size()); ++r) {
      std::istringstream in(std::string(values[r].begin(), values[r].end()));
      Peer seen;
      if (!(in >> seen.beat >> seen.progress >> seen.state)) continue;
      Peer& p = peers_[r];
      if (seen.beat != p.beat) {
        last_change_[r] = now;
        warned_[r] = false;
      }
      p.beat = seen.beat;
      p.progress = seen.progress;
      p.state = seen.state;
      p.silent_seconds = seconds_between(last_change_[r], now);
      if (r != rank_ && p.state == "running" && !warned_[r] &&
          p.silent_seconds * 1000.0 > static_cast<double>(warn_after_.count())) {
        warned_[r] = true;
        warnings.push_back("rank " + std::to_string(r) + " has sent no heartbeat for " +
                           std::to_string(static_cast<int>(p.silent_seconds)) + " s (dead, killed or stopped?)");
      }
    }
  }
  for (const auto& w : warnings) log_warn("{}", w);
}

std::vector<Heartbeat::Peer> Heartbeat::peers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Peer> out = peers_;
  const auto now = Clock::now();
  for (size_t r = 0; r < out.size(); ++r) out[r].silent_seconds = seconds_between(last_change_[r], now);
  return out;
}

double Heartbeat::store_down_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return store_ok_ ? 0.0 : seconds_between(last_ok_, Clock::now());
}

}  // namespace hwt
