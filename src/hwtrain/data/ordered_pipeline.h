// run_ordered_pipeline(): produce items on a reader thread, transform them on worker threads, and
// consume them on the calling thread in the order they were produced, with at most
// `max_in_flight` items alive at once (bounded memory, items reused). prepare tokenizes this way.
// The first error in item order (or the reader's, after the items before it) stops everything
// and is rethrown by the caller; no thread outlives the call.
#pragma once
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace hwt {

template <class Item>
void run_ordered_pipeline(const std::function<bool(Item&)>& produce, const std::function<void(Item&)>& work,
                          const std::function<void(Item&)>& consume, int num_workers, size_t max_in_flight,
                          const std::function<void()>& idle = {}) {
  enum class State { kFree, kProduced, kWorking, kDone };
  struct Slot {
    Item item;
    State state = State::kFree;
    std::exception_ptr error;
  };
  if (num_workers < 1) num_workers = 1;
  if (max_in_flight < 1) max_in_flight = 1;
  std::vector<std::unique_ptr<Slot>> slots;
  for (size_t i = 0; i < max_in_flight; ++i) slots.push_back(std::make_unique<Slot>());
  std::mutex mu;
  std::condition_variable cv;
  bool abort = false;
  int64_t end_seq = -1;       // number of items produced, once the reader is done
  int64_t next_work = 0;      // next produced item a worker takes
  int64_t produced = 0;
  std::exception_ptr reader_error;

  auto slot_of = [&](int64_t seq) -> Slot& { return *slots[static_cast<size_t>(seq) % max_in_flight]; };

  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(num_workers));  // before any thread: growing it later could throw
  std::thread reader([&] {
    for (int64_t seq = 0;; ++seq) {
      Slot* s;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return abort || slot_of(seq).state == State::kFree; });
        if (abort) return;
        s = &slot_of(seq);
      }
      bool more = false;
      std::exception_ptr error;
      try {
        more = produce(s->item);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!more || error) {
        end_seq = seq;
        reader_error = error;
        cv.notify_all();
        return;
      }
      s->state = State::kProduced;
      produced = seq + 1;
      cv.notify_all();
    }
  });
  auto worker = [&] {
    for (;;) {
      Slot* s;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return abort || next_work < produced || (end_seq >= 0 && next_work >= end_seq); });
        if (abort || next_work >= produced) return;
        s = &slot_of(next_work++);
        s->state = State::kWorking;
      }
      try {
        work(s->item);
      } catch (...) {
        s->error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      s->state = State::kDone;
      cv.notify_all();
    }
  };
  auto stop = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      abort = true;
    }
    cv.notify_all();
    reader.join();
    for (auto& t : workers) t.join();
  };
  try {
    for (int w = 0; w < num_workers; ++w) workers.emplace_back(worker);
  } catch (const std::system_error& e) {  // no thread may be left joinable: that would abort
    stop();
    throw std::runtime_error("cannot start worker thread " + std::to_string(workers.size() + 1) + " of " +
                             std::to_string(num_workers) + ": " + e.what() + "; use fewer threads");
  }
  try {
    for (int64_t seq = 0;; ++seq) {
      Slot* s = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
          if (slot_of(seq).state == State::kDone && (end_seq < 0 || seq < end_seq)) {
            s = &slot_of(seq);
            break;
          }
          if (end_seq >= 0 && seq >= end_seq) break;
          if (idle) {
            if (!cv.wait_for(lock, std::chrono::milliseconds(200), [&] {
                  return slot_of(seq).state == State::kDone || (end_seq >= 0 && seq >= end_seq);
                })) {
              lock.unlock();
              idle();
              lock.lock();
            }
          } else {
            cv.wait(lock, [&] { return slot_of(seq).state == State::kDone || (end_seq >= 0 && seq >= end_seq); });
          }
        }
      }
      if (s == nullptr) break;
      if (s->error) std::rethrow_exception(s->error);
      consume(s->item);
      {
        std::lock_guard<std::mutex> lock(mu);
        s->state = State::kFree;
      }
      cv.notify_all();
    }
  } catch (...) {
    stop();
    throw;
  }
  stop();
  if (reader_error) std::rethrow_exception(reader_error);
}

}  // namespace hwt
