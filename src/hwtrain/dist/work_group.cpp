#include "hwtrain/dist/work_group.h"

#include <algorithm>
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

bool WorkGroup::wait(std::chrono::milliseconds timeout) {
  bool all = true;
  for (const auto& w : parts_) all = w->wait(timeout) && all;  // each part bounded by the timeout
  return all;
}

void WorkGroup::abort() {
  for (const auto& w : parts_) w->abort();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkGroup::getFuture() {
  c10::List<c10::intrusive_ptr<c10::ivalue::Future>> futures(c10::FutureType::create(c10::AnyType::get()));
  for (const auto& w : parts_) futures.push_back(w->getFuture());
  return c10::collectAll(futures);
}

}  // namespace hwt
