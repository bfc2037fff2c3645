#include "hwtrain/dist/work_group.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

namespace hwt {

WorkGroup::WorkGroup(std::vector<c10::intrusive_ptr<c10d::Work>> parts) : parts_(std::move(parts)) {}

bool WorkGroup::isCompleted() {
  return std::all_of(parts_.begin(), parts_.end(), [](const auto& w) { return w->isCompleted(); });
}

bool WorkGroup::isSuccess() const { return exception() == nullptr; }

std::exception_ptr WorkGroup::exception() const {
  for (const auto& w : parts_) {
    if (std::exception_ptr e = w->exception()) return e;
  }
  return nullptr;
}

// Every part is waited for (none left running behind a failed one), all within one deadline; the
// first failure is rethrown after.
bool WorkGroup::wait(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const bool bounded = timeout != kNoTimeout;
  const Clock::time_point deadline = Clock::now() + (bounded ? timeout : std::chrono::milliseconds(0));
  std::exception_ptr first;
  bool all = true;
  for (const auto& w : parts_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      all = w->wait(bounded ? std::max(left, std::chrono::milliseconds(1)) : kNoTimeout) && all;
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
  return all;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkGroup::getFuture() {
  c10::List<c10::intrusive_ptr<c10::ivalue::Future>> futures(c10::FutureType::create(c10::AnyType::get()));
  for (const auto& w : parts_) futures.push_back(w->getFuture());
  return c10::collectAll(futures);
}

}  // namespace hwt
