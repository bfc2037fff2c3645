#include "hwtrain/data/batch_loader.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <limits>

#include "hwtrain/core/error.h"
#include "hwtrain/core/json_integer.h"
#include "hwtrain/obs/log.h"

namespace hwt {

using Clock = std::chrono::steady_clock;

namespace {
// next() spins this long for a batch about to be ready before it sleeps: waking from a condition
// variable costs a futex wake-up and a reschedule, tens of microseconds in a VM. No yielding in
// the spin: on a busy machine a yield can cost a whole time slice.
constexpr auto kSpin = std::chrono::microseconds(30);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}

void LoaderOptions::validate() const {
  auto need = [](const char* key, int64_t value, int64_t min) {
    if (value < min) {
      throw ConfigError(std::string(key) + " = " + std::to_string(value) + " is out of range; valid: >= " + std::to_string(min));
    }
  };
  need("loader batch size", batch_size, 1);
  need("model.block_size", block_size, 1);
  need("world size", world_size, 1);
  need("optimization.num_workers", num_workers, 0);
  need("optimization.prefetch_factor", prefetch_factor, 1);
  if (rank < 0 || rank >= world_size) {
    throw ConfigError("rank " + std::to_string(rank) + " is out of range for world size " + std::to_string(world_size));
  }
}

nlohmann::json LoaderState::to_json() const {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, seed);
  return {{"seed", buf}, {"epoch", epoch}, {"position", position}};
}

LoaderState LoaderState::from_json(const nlohmann::json& j) {
  LoaderState s;
  try {
    s.seed = std::stoull(j.at("seed").get<std::string>(), nullptr, 16);
    // Integers only: get<int64_t>() of a float such as 1e300 is undefined behaviour.
    for (const char* key : {"epoch", "position"}) {
      if (!is_json_integer_in(j.at(key), 0, std::numeric_limits<int64_t>::max())) {
        throw DataError("data loader state " + j.dump() + ": '" + key + "' must be a non-negative integer");
      }
    }
    s.epoch = j.at("epoch").get<int64_t>();
    s.position = j.at("position").get<int64_t>();
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError("data loader state " + j.dump() + " is malformed (" + e.what() +
                    "); expected {\"seed\": \"<hex>\", \"epoch\": N, \"position\": N}");
  }
  if (s.epoch < 0 || s.position < 0) throw DataError("data loader state " + j.dump() + " has a negative epoch or position");
  return s;
}

BatchLoader::BatchLoader(TokenSequence tokens, LoaderOptions options, std::string what)
    : options_(options), what_(std::move(what)) {
  options_.validate();
  draws_ = std::make_shared<const WindowDraws>(
      std::make_shared<const DatasetSampler>(std::move(tokens), options_.block_size, options_.seed, options_.sampling, what_),
      what_);
  start_workers();
}

BatchLoader::BatchLoader(std::shared_ptr<const RowDraws> draws, LoaderOptions options, std::string what)
    : options_(options), what_(std::move(what)), draws_(std::move(draws)) {
  options_.validate();
  start_workers();
}

void BatchLoader::start_workers() {
  if (options_.pin_memory) {
    pinned_ = torch::cuda::is_available();
    if (!pinned_) warn_once("loader-pin", "data loader: pin_memory asked for, but CUDA is not available; batches stay in pageable memory");
  }
  if (options_.num_workers > 0) {
    for (int64_t i = 0; i < options_.num_workers * options_.prefetch_factor; ++i) {
      slots_.push_back(std::make_unique<Slot>());
    }
    for (int64_t w = 0; w < options_.num_workers; ++w) workers_.emplace_back([this] { worker_loop(); });
  }
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

LoadedBatch BatchLoader::assemble(const RowDraws& draws, int64_t first_draw) const {
  const int64_t N = options_.batch_size;
  Rows rows = draws.assemble(first_draw, windows_per_step(), options_.rank * N, N, pinned_);
  LoadedBatch b;
  b.first_draw = first_draw;
  b.x_NT = std::move(rows.x);
  b.y_NT = std::move(rows.y);
  return b;
}

void BatchLoader::worker_loop() {
  const auto capacity = static_cast<int64_t>(slots_.size());
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!stop_ && next_produce_ >= consumed_ + capacity) {
      ++workers_waiting_;
      work_cv_.wait(lock, [&] { return stop_ || next_produce_ < consumed_ + capacity; });
      --workers_waiting_;
    }
    if (stop_) return;
    const int64_t step = next_produce_++;
    const uint64_t generation = generation_;
    const int64_t first_draw = base_draw_ + step * windows_per_step();
    std::shared_ptr<const RowDraws> sampler = draws_;
    lock.unlock();
    LoadedBatch batch;
    std::exception_ptr error;
    try {
      batch = assemble(*sampler, first_draw);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (generation != generation_) continue;  // restore() ran meanwhile: this batch is stale
    Slot& slot = *slots_[static_cast<size_t>(step % capacity)];
    slot.batch = std::move(batch);
    slot.error = error;
    slot.ready_step.store(step, std::memory_order_release);
    if (consumer_waiting_) {
      lock.unlock();
      ready_cv_.notify_one();
      lock.lock();
    }
  }
}

LoadedBatch BatchLoader::next() {
  const auto t0 = Clock::now();
  LoadedBatch batch;
  if (workers_.empty()) {
    std::shared_ptr<const RowDraws> sampler;
    int64_t first_draw;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sampler = draws_;
      first_draw = base_draw_ + consumed_ * windows_per_step();
    }
    batch = assemble(*sampler, first_draw);
    std::lock_guard<std::mutex> lock(mu_);
    ++consumed_;
  } else {
    std::exception_ptr error;
    bool wake_worker = false;
    {
      // consumed_ changes only on this thread (next() and restore() are the consumer's), so the
      // spin may read it without the lock.
      const int64_t want = consumed_;
      Slot& slot = *slots_[static_cast<size_t>(want % static_cast<int64_t>(slots_.size()))];
      auto ready = [&] { return slot.ready_step.load(std::memory_order_acquire) == want; };
      if (!ready()) {
        num_starved_.fetch_add(1, std::memory_order_relaxed);
        const auto spin_until = Clock::now() + kSpin;
        while (!ready() && Clock::now() < spin_until) cpu_relax();
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (!ready()) {
        consumer_waiting_ = true;
        ready_cv_.wait(lock, ready);
        consumer_waiting_ = false;
      }
      batch = std::move(slot.batch);
      error = slot.error;
      slot.reset();
      ++consumed_;
      wake_worker = workers_waiting_ > 0;
    }
    if (wake_worker) work_cv_.notify_one();  // after unlocking: the woken worker does not block on mu_
    if (error) std::rethrow_exception(error);
  }
  batch.wait_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return batch;
}

LoaderState BatchLoader::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t draw = base_draw_ + consumed_ * windows_per_step();
  const int64_t per_epoch = draws_->draws_per_epoch();
  return {draws_->seed(), draw / per_epoch, draw % per_epoch};
}

void BatchLoader::restore(const LoaderState& state) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state.seed != draws_->seed()) draws_ = draws_->reseeded(state.seed);
    base_draw_ = state.epoch * draws_->draws_per_epoch() + state.position;
    consumed_ = next_produce_ = 0;
    ++generation_;
    for (auto& s : slots_) s->reset();
  }
  work_cv_.notify_all();
}

}  // namespace hwt
