// Threads as the ranks of a group, for testing model parallelism in one process: ThreadGroup
// exchanges tensors among its threads (collectives once all have arrived; point-to-point through
// one mailbox per (sender, receiver, tag)); ThreadComm is one rank's TensorParallelComm over it.
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <stdexcept>
#include <functional>
#include <string>
#include <thread>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "hwtrain/model/tensor_parallel.h"

namespace hwt::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), slots_(static_cast<size_t>(size)) {}
  int size() const { return size_; }

  // Every rank's tensor, stacked in rank order, once all have arrived.
  torch::Tensor exchange(int rank, const torch::Tensor& t) {
    std::unique_lock<std::mutex> lock(mutex_);
    slots_[static_cast<size_t>(rank)] = t.detach().clone();
    const int64_t generation = generation_;
    if (++arrived_ == size_) {
      result_ = torch::stack(slots_);
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
      if (generation_ == generation) throw std::runtime_error("another rank of the group failed");
    }
    return result_;
  }

  // Returns how many messages this mailbox has had posted, this one included.
  int64_t post(int from, int to, int tag, const torch::Tensor& t) {
    std::lock_guard<std::mutex> lock(mutex_);
    mail_[{from, to, tag}].push_back(t.detach().clone());
    cv_.notify_all();
    return ++posted_[{from, to, tag}];
  }

  // Blocks until the receiver has taken `count` messages from the mailbox (a send that completes
  // only when it is received, as NCCL's); throws after `limit` (the pair would wait forever).
  void wait_taken(int from, int to, int tag, int64_t count, std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool done = cv_.wait_for(lock, limit, [&] { return taken_[{from, to, tag}] >= count || aborted_; });
    if (aborted_) throw std::runtime_error("another rank of the group failed");
    if (!done) throw std::runtime_error("a send was waited for before its receive could be posted");
  }

  // A rank failed: every rank waiting in exchange or take, and every later one, throws.
  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    cv_.notify_all();
  }

  // Blocks until a message is there; with `limit`, throws after it (every rank waiting to receive
  // what another sends only later would wait forever).
  torch::Tensor take(int from, int to, int tag, std::chrono::seconds limit = std::chrono::seconds::max()) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto& box = mail_[{from, to, tag}];
    const auto ready = [&] { return !box.empty() || aborted_; };
    if (limit == std::chrono::seconds::max()) {
      cv_.wait(lock, ready);
    } else if (!cv_.wait_for(lock, limit, ready)) {
      throw std::runtime_error("a receive waited for a message that was never sent");
    }
    if (box.empty()) throw std::runtime_error("another rank of the group failed");
    torch::Tensor t = box.front();
    box.pop_front();
    ++taken_[{from, to, tag}];
    cv_.notify_all();
    return t;
  }

 private:
  int size_;
  std::vector<torch::Tensor> slots_;
  torch::Tensor result_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  bool aborted_ = false;
  std::map<std::tuple<int, int, int>, std::deque<torch::Tensor>> mail_;  // (from, to, tag)
  std::map<std::tuple<int, int, int>, int64_t> posted_, taken_;          // messages per mailbox
  std::mutex mutex_;
  std::condition_variable cv_;
};

class ThreadComm : public TensorParallelComm {
 public:
  ThreadComm(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  void all_reduce_sum(torch::Tensor& t) override { t.copy_(group_.exchange(rank_, t).sum(0)); }
  torch::Tensor all_gather(const torch::Tensor& t) override { return group_.exchange(rank_, t); }
  torch::Tensor reduce_scatter(const torch::Tensor& t) override {
    return group_.exchange(rank_, t).sum(0).chunk(group_.size(), 0)[static_cast<size_t>(rank_)].clone();
  }
  std::function<void()> send_async(const torch::Tensor& t, int peer, int tag) override {
    group_.post(rank_, peer, tag, t);
    return [] {};
  }
  void recv(torch::Tensor& t, int peer, int tag) override { t.copy_(group_.take(peer, rank_, tag)); }
  // Tests set it to take the path NCCL's blocking sends need (the sends here never block).
  bool sends_wait_for_receives() const override { return blocking_sends; }
  bool blocking_sends = false;

 private:
  ThreadGroup& group_;
  int rank_;
};

// Runs body(rank) for the ranks of `group` on threads at once; returns each rank's exception
// message, "" where it threw none. A rank that throws aborts the group, so that the others do not
// wait for it forever; `also`: the subgroups the ranks talk over besides, aborted with it.
inline std::vector<std::string> run_ranks(ThreadGroup& group, const std::function<void(int rank)>& body,
                                          const std::vector<ThreadGroup*>& also = {}) {
  std::vector<std::string> errors(static_cast<size_t>(group.size()));
  std::vector<std::thread> threads;
  auto abort_all = [&] {
    group.abort();
    for (ThreadGroup* g : also) g->abort();
  };
  for (int r = 0; r < group.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        abort_all();
      } catch (...) {
        errors[static_cast<size_t>(r)] = "a non-standard exception";
        abort_all();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace hwt::testing
