// A stage's line to its neighbours that keeps NCCL's rules for point-to-point operations issued as
// ProcessGroupComm issues them there (every one in a coalesced group over the group's communicator),
// for testing in one process what only a multi-GPU run would otherwise show (ThreadGroup's
// mailboxes underneath):
// - tags are ignored: messages between a pair match in the order each direction issues them;
// - each rank runs its groups (and collectives) in issue order on one stream, whatever the peer:
//   a group starts only once this rank's earlier sends were received;
// - a group completes once all its operations have (a send once its receive runs), and the host
//   waits for a receiving group (send_and_recv and exchange: sends and all) before going on; a
//   lone send's wait blocks until it is received.
// A schedule that would hang on NCCL fails here after `limit` with "a send was waited for before its
// receive could be posted" (or, where every rank waits to receive, "a receive waited for a message
// that was never sent").
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "support/thread_comm.h"

namespace hwt::testing {

class InOrderComm : public ThreadComm {
 public:
  InOrderComm(ThreadGroup& group, int rank, std::chrono::seconds limit = std::chrono::seconds(20))
      : ThreadComm(group, rank), group_(group), rank_(rank), limit_(limit) {
    blocking_sends = true;
  }
  std::function<void()> send_async(const torch::Tensor& t, int peer, int /*tag*/) override {
    earlier_sends_received();
    const int64_t seq = post(t, peer);
    auto waited = std::make_shared<bool>(false);
    return [this, waited, peer, seq] {
      if (*waited) return;
      group_.wait_taken(rank_, peer, 0, seq, limit_);
      *waited = true;
    };
  }
  void recv(torch::Tensor& t, int peer, int /*tag*/) override {
    earlier_sends_received();
    t.copy_(group_.take(peer, rank_, 0, limit_));
  }
  std::function<void()> send_and_recv(const torch::Tensor& send, int send_peer, int /*send_tag*/,
                                      torch::Tensor& recv, int recv_peer, int /*recv_tag*/) override {
    earlier_sends_received();
    const int64_t seq = post(send, send_peer);
    recv.copy_(group_.take(recv_peer, rank_, 0, limit_));
    group_.wait_taken(rank_, send_peer, 0, seq, limit_);  // the group completes with its send
    return [] {};
  }
  void exchange(const std::vector<Transfer>& transfers) override {  // one group: all or nothing
    earlier_sends_received();
    std::map<int, int64_t> last;  // per peer: this group's last send
    for (const Transfer& t : transfers) {
      if (t.send) last[t.peer] = post(*t.tensor, t.peer);
    }
    for (const Transfer& t : transfers) {
      if (!t.send) t.tensor->copy_(group_.take(t.peer, rank_, 0, limit_));
    }
    for (const auto& [peer, seq] : last) group_.wait_taken(rank_, peer, 0, seq, limit_);
  }
  void all_reduce_sum(torch::Tensor& t) override {
    earlier_sends_received();
    ThreadComm::all_reduce_sum(t);
  }

 private:
  int64_t post(const torch::Tensor& t, int peer) { return sent_[peer] = group_.post(rank_, peer, 0, t); }
  void earlier_sends_received() {
    for (const auto& [peer, count] : sent_) group_.wait_taken(rank_, peer, 0, count, limit_);
  }

  ThreadGroup& group_;
  int rank_;
  std::chrono::seconds limit_;
  std::map<int, int64_t> sent_;  // per peer: how many sends this rank has issued to it
};

}  // namespace hwt::testing
