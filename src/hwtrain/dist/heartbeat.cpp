#include "hwtrain/dist/heartbeat.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <sstream>

#include "hwtrain/obs/log.h"

namespace hwt {

using Clock = std::chrono::steady_clock;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

struct Heartbeat::Core {
  Core(c10::intrusive_ptr<c10d::Store> s, int r, int w, std::chrono::milliseconds i, std::chrono::milliseconds warn,
       std::shared_ptr<const std::atomic<int64_t>> p)
      : store(std::move(s)), rank(r), world_size(w), interval(i), warn_after(warn), progress(std::move(p)),
        peers(w), last_change(w, Clock::now()), warned(w, false), last_ok(Clock::now()) {}

  // A beat waiting longer than this is a store that does not answer.
  Clock::duration stuck_after() const { return 2 * interval + std::chrono::seconds(1); }
  void run();
  void tick();
  void read_peers(const std::vector<std::vector<uint8_t>>& values);

  const c10::intrusive_ptr<c10d::Store> store;
  const int rank, world_size;
  const std::chrono::milliseconds interval, warn_after;
  const std::shared_ptr<const std::atomic<int64_t>> progress;

  mutable std::mutex mutex;
  std::condition_variable cv;
  bool stop = false, publish_now = false, exited = false;
  std::string state = "running";
  int64_t beat = 0;
  std::vector<Peer> peers;
  std::vector<Clock::time_point> last_change;
  std::vector<bool> warned;
  Clock::time_point last_ok;
  std::optional<Clock::time_point> beat_started;  // set while a beat waits on the store
  bool store_ok = true;
};

std::string Heartbeat::encode(int64_t beat, int64_t progress, const std::string& state) {
  return std::to_string(beat) + " " + std::to_string(progress) + " " + state;
}

Heartbeat::Heartbeat(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                     std::chrono::milliseconds interval, std::chrono::milliseconds warn_after,
                     std::shared_ptr<const std::atomic<int64_t>> progress)
    : core_(std::make_shared<Core>(std::move(store), rank, world_size, interval, warn_after, std::move(progress))) {
  // A store that is slow but alive must not stall a beat for long.
  core_->store->setTimeout(interval * 2 + std::chrono::milliseconds(1000));
  core_->tick();
  thread_ = std::thread([core = core_] { core->run(); });
}

Heartbeat::~Heartbeat() { stop(); }

void Heartbeat::stop() {
  if (!thread_.joinable()) return;
  std::unique_lock<std::mutex> lock(core_->mutex);
  core_->stop = true;
  core_->cv.notify_all();
  const bool ended = core_->cv.wait_for(lock, core_->stuck_after() + core_->interval, [this] { return core_->exited; });
  lock.unlock();
  if (ended) {
    thread_.join();
  } else {
    thread_.detach();  // blocked on a frozen store; it owns its Core, the process exit ends it
  }
}

void Heartbeat::set_state(const std::string& state) {
  std::lock_guard<std::mutex> lock(core_->mutex);
  core_->state = state;
  core_->publish_now = true;
  core_->cv.notify_all();
}

std::chrono::milliseconds Heartbeat::interval() const { return core_->interval; }

void Heartbeat::Core::run() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    cv.wait_for(lock, interval, [this] { return stop || publish_now; });
    const bool last = stop;
    publish_now = false;
    lock.unlock();
    tick();
    lock.lock();
    if (last) break;
  }
  exited = true;
  cv.notify_all();
}

void Heartbeat::Core::tick() {
  std::string now_state;
  int64_t now_beat;
  {
    std::lock_guard<std::mutex> lock(mutex);
    now_state = state;
    now_beat = ++beat;
    beat_started = Clock::now();
  }
  std::vector<std::vector<uint8_t>> values;
  bool ok = true;
  try {
    store->set(key(rank), bytes(encode(now_beat, progress->load(), now_state)));
    std::vector<std::string> keys;
    for (int r = 0; r < world_size; ++r) keys.push_back(key(r));
    values = store->multiGet(keys);
  } catch (const std::exception&) {
    ok = false;  // the store is gone (rank 0 ended or died)
  }
  std::lock_guard<std::mutex> lock(mutex);
  beat_started.reset();
  store_ok = ok;
  if (!ok) return;
  last_ok = Clock::now();
  read_peers(values);
}

// Called with the mutex held.
void Heartbeat::Core::read_peers(const std::vector<std::vector<uint8_t>>& values) {
  const auto now = Clock::now();
  for (int r = 0; r < world_size && r < static_cast<int>(values.size()); ++r) {
    std::istringstream in(std::string(values[r].begin(), values[r].end()));
    Peer seen;
    if (!(in >> seen.beat >> seen.progress >> seen.state)) continue;
    Peer& p = peers[r];
    if (seen.beat != p.beat) {
      last_change[r] = now;
      warned[r] = false;
    }
    p.beat = seen.beat;
    p.progress = seen.progress;
    p.state = seen.state;
    p.silent_seconds = seconds_between(last_change[r], now);
    if (r != rank && p.state == "running" && !warned[r] &&
        p.silent_seconds * 1000.0 > static_cast<double>(warn_after.count())) {
      warned[r] = true;
      log_warn("rank {} has sent no heartbeat for {} s (dead, killed or stopped?)", r,
               static_cast<int>(p.silent_seconds));
    }
  }
}

std::vector<Heartbeat::Peer> Heartbeat::peers() const {
  std::lock_guard<std::mutex> lock(core_->mutex);
  std::vector<Peer> out = core_->peers;
  const auto now = Clock::now();
  for (size_t r = 0; r < out.size(); ++r) out[r].silent_seconds = seconds_between(core_->last_change[r], now);
  return out;
}

double Heartbeat::store_down_seconds() const {
  std::lock_guard<std::mutex> lock(core_->mutex);
  const auto now = Clock::now();
  const bool stuck = core_->beat_started && now - *core_->beat_started > core_->stuck_after();
  return core_->store_ok && !stuck ? 0.0 : seconds_between(core_->last_ok, now);
}

}  // namespace hwt
