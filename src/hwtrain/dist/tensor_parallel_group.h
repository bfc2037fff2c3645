// ProcessGroupComm: a c10d process group (usually a mesh's tensor-parallel subgroup) as the
// model's TensorParallelComm (model/tensor_parallel.h). Every wait is bounded by dist.timeout and a
// failure names the rank to blame like every other collective; the started (_async) collectives
// run on c10d's own threads until waited for.
#pragma once
#include <functional>
#include <memory>

#include "hwtrain/dist/process_group.h"
#include "hwtrain/model/tensor_parallel.h"

namespace hwt {

class ProcessGroupComm : public TensorParallelComm {
 public:
  explicit ProcessGroupComm(std::shared_ptr<ProcessGroup> group) : group_(std::move(group)) {}
  int rank() const override { return group_->rank(); }
  int size() const override { return group_->world_size(); }
  void all_reduce_sum(torch::Tensor& t) override;
  torch::Tensor all_gather(const torch::Tensor& t) override;
  torch::Tensor reduce_scatter(const torch::Tensor& t) override;
  std::function<void()> send_async(const torch::Tensor& t, int peer, int tag) override;
  void recv(torch::Tensor& t, int peer, int tag) override;
  // One coalesced group where the backend has them (NCCL: exchange), else the send then the
  // receive. On NCCL send_async and recv are groups of one as well (tensor_parallel_group.cpp says why).
  std::function<void()> send_and_recv(const torch::Tensor& send, int send_peer, int send_tag, torch::Tensor& recv,
                                      int recv_peer, int recv_tag) override;
  // One coalesced group where the backend has them (NCCL), else the base class's turn.
  void exchange(const std::vector<Transfer>& transfers) override;
  bool sends_wait_for_receives() const override { return group_->backend_name() == "nccl"; }
  // In the background (c10d's own threads); their waits count as blocked time, the rest is hidden.
  std::function<void()> all_reduce_sum_async(torch::Tensor& t) override;
  std::function<torch::Tensor()> all_gather_async(const torch::Tensor& t) override;
  std::function<torch::Tensor()> reduce_scatter_async(const torch::Tensor& t) override;
  ProcessGroup& group() { return *group_; }

  // What the group has carried so far (this rank's view; blocking time includes waiting for peers on
  // Gloo; on NCCL, whose waits are the stream's (ProcessGroup::wait), it is the host's time to issue).
  // bytes: what this rank sends in ring algorithms (an all-reduce of N bytes 2 N (t-1)/t, an
  // all-gather or reduce-scatter of N whole bytes N (t-1)/t), plus its point-to-point sends; so a
  // sequence-parallel gather + scatter pair counts as much as the all-reduce it replaces.
  struct Stats {
    int64_t collectives = 0, sends = 0, bytes = 0;
    double seconds = 0;  // in all-reduces, all-gathers and receives (waiting for started ones)
    int64_t started = 0;  // of the collectives, those started ahead of their wait (the _async forms)
  };
  const Stats& stats() const { return stats_; }

 private:
  std::function<void()> waiter(ProcessGroup::WorkPtr work, const char* what);
  std::function<torch::Tensor()> timed(std::function<torch::Tensor()> wait);
  std::function<torch::Tensor()> start_all_reduce(torch::Tensor& t);
  std::function<torch::Tensor()> start_all_gather(const torch::Tensor& t);
  std::function<torch::Tensor()> start_reduce_scatter(const torch::Tensor& t);
  int64_t ring_bytes(int64_t whole_bytes, int passes) const {
    return passes * whole_bytes * (size() - 1) / size();
  }

  std::shared_ptr<ProcessGroup> group_;
  Stats stats_;
};

}  // namespace hwt
