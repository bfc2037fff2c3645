// A stage's line to its neighbours that keeps NCCL's point-to-point rules, for testing in one
// process what only a multi-GPU run would otherwise show (ThreadGroup's mailboxes underneath):
// - tags are ignored: messages between a pair match in the order each direction issues them;
// - a send completes only once its receive runs, and waiting for it blocks until then (the compute
//   stream waits on it, and everything issued after waits on the compute stream);
// - a rank's operations with one peer run in the order it issued them (one stream per pair), so a
//   receive cannot run before this rank's earlier sends to that peer were received;
// - except within one group (send_and_recv: NCCL's coalesced launch, batch_isend_irecv), whose
//   operations run together.
// A schedule that would hang on NCCL fails here after `limit` with "a send was waited for before its
// receive could be posted".
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>

#include "support/thread_comm.h"

namespace hwt::testing {

class InOrderComm : public ThreadComm {
 public:
  InOrderComm(ThreadGroup& group, int rank, std::chrono::seconds limit = std::chrono::seconds(20))
      : ThreadComm(group, rank), group_(group), rank_(rank), limit_(limit) {
    blocking_sends = true;
  }
  std::function<void()> send_async(const torch::Tensor& t, int peer, int /*tag*/) override {
    const int64_t seq = group_.post(rank_, peer, 0, t);
    sent_[peer] = seq;
    auto waited = std::make_shared<bool>(false);
    return [this, waited, peer, seq] {
      if (*waited) return;
      group_.wait_taken(rank_, peer, 0, seq, limit_);
      *waited = true;
    };
  }
  void recv(torch::Tensor& t, int peer, int /*tag*/) override {
    group_.wait_taken(rank_, peer, 0, sent_[peer], limit_);  // this pair's earlier sends ran first
    t.copy_(group_.take(peer, rank_, 0));
  }
  std::function<void()> send_and_recv(const torch::Tensor& send, int send_peer, int /*send_tag*/,
                                      torch::Tensor& recv, int recv_peer, int /*recv_tag*/) override {
    group_.wait_taken(rank_, recv_peer, 0, sent_[recv_peer], limit_);  // those before the group
    std::function<void()> wait = send_async(send, send_peer, 0);
    recv.copy_(group_.take(recv_peer, rank_, 0));
    return wait;
  }

 private:
  ThreadGroup& group_;
  int rank_;
  std::chrono::seconds limit_;
  std::map<int, int64_t> sent_;  // per peer: how many sends this rank has issued to it
};

}  // namespace hwt::testing
