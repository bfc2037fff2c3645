#include "hwtrain/dist/tensor_parallel_group.h"

#include <algorithm>

#include "hwtrain/core/clock.h"

namespace hwt {

// The blocking forms: the time from the start to the end counts as blocked.
void ProcessGroupComm::all_reduce_sum(torch::Tensor& t) {
  const auto start = Clock::now();
  // c10d reduces contiguous tensors in place; a view would be left untouched.
  torch::Tensor buffer = t.is_contiguous() ? t : t.contiguous();
  start_all_reduce(buffer)();
  if (!buffer.is_same(t)) t.copy_(buffer);
  stats_.seconds += seconds_since(start);
}

torch::Tensor ProcessGroupComm::all_gather(const torch::Tensor& t) {
  const auto start = Clock::now();
  torch::Tensor all = start_all_gather(t)();
  stats_.seconds += seconds_since(start);
  return all;
}

torch::Tensor ProcessGroupComm::reduce_scatter(const torch::Tensor& t) {
  const auto start = Clock::now();
  torch::Tensor mine = start_reduce_scatter(t)();
  stats_.seconds += seconds_since(start);
  return mine;
}

// The wait of a started collective (blocking: bounded by dist.timeout, naming the rank to blame).
// It refers to this comm, which outlives every autograd graph using it (the model holds it).
std::function<void()> ProcessGroupComm::waiter(ProcessGroup::WorkPtr work, const char* what) {
  ++stats_.collectives;
  return [this, work, what] { group_->wait(work, what); };
}

// The started forms: only the wait counts as blocked.
std::function<torch::Tensor()> ProcessGroupComm::timed(std::function<torch::Tensor()> wait) {
  ++stats_.started;
  return [this, wait] {
    const auto start = Clock::now();
    torch::Tensor result = wait();
    stats_.seconds += seconds_since(start);
    return result;
  };
}

// Its wait gives t, reduced in place.
std::function<torch::Tensor()> ProcessGroupComm::start_all_reduce(torch::Tensor& t) {
  TORCH_CHECK(t.is_contiguous(), "ProcessGroupComm::all_reduce_sum_async needs a contiguous tensor");
  stats_.bytes += ring_bytes(static_cast<int64_t>(t.nbytes()), 2);
  auto wait = waiter(group_->all_reduce_sum(t), "a tensor-parallel all-reduce");
  return [wait, t] {
    wait();
    return t;
  };
}

std::function<torch::Tensor()> ProcessGroupComm::start_all_gather(const torch::Tensor& t) {
  torch::Tensor input = t.contiguous().view({-1});  // the group gathers flat tensors
  std::vector<int64_t> shape{group_->world_size()};
  for (int64_t d : t.sizes()) shape.push_back(d);
  if (t.numel() == 0) {
    torch::Tensor none = torch::empty(shape, t.options());
    return [none] { return none; };
  }
  torch::Tensor output = torch::empty({group_->world_size() * input.numel()}, input.options());
  stats_.bytes += ring_bytes(static_cast<int64_t>(output.nbytes()), 1);
  auto wait = waiter(group_->all_gather_into(output, input), "a tensor-parallel all-gather");
  return [wait, input, output, shape] {
    wait();
    return output.view(shape);
  };
}

std::function<torch::Tensor()> ProcessGroupComm::start_reduce_scatter(const torch::Tensor& t) {
  TORCH_CHECK(t.dim() >= 1 && t.size(0) % group_->world_size() == 0, "reduce_scatter: ", t.size(0),
              " rows do not divide by the group's ", group_->world_size(), " ranks");
  torch::Tensor input = t.contiguous().view({-1});
  std::vector<int64_t> shape = t.sizes().vec();
  shape[0] /= group_->world_size();
  torch::Tensor output = torch::empty({input.numel() / group_->world_size()}, input.options());
  stats_.bytes += ring_bytes(static_cast<int64_t>(input.nbytes()), 1);
  auto wait = waiter(group_->reduce_scatter_sum(output, input), "a tensor-parallel reduce-scatter");
  return [wait, input, output, shape] {
    wait();
    return output.view(shape);
  };
}

std::function<void()> ProcessGroupComm::all_reduce_sum_async(torch::Tensor& t) {
  return timed(start_all_reduce(t));  // the reduced t, dropped: the caller holds it
}

std::function<torch::Tensor()> ProcessGroupComm::all_gather_async(const torch::Tensor& t) {
  return timed(start_all_gather(t));
}

std::function<torch::Tensor()> ProcessGroupComm::reduce_scatter_async(const torch::Tensor& t) {
  return timed(start_reduce_scatter(t));
}

// Where the backend groups point-to-point operations (NCCL) every one goes in a group, even alone:
// NCCL sends a lone one over a two-rank communicator of its own, whose messages never match those
// of a group (over the whole group's communicator) between the same two ranks.
std::function<void()> ProcessGroupComm::send_async(const torch::Tensor& t, int peer, int tag) {
  auto tensor = std::make_shared<torch::Tensor>(t.contiguous());
  ++stats_.sends;
  stats_.bytes += static_cast<int64_t>(tensor->nbytes());
  const std::string what = "sending to rank " + std::to_string(group_->world_rank(peer));
  auto work = group_->coalesces_point_to_point()
                  ? group_->start_point_to_point({{true, tensor.get(), peer, tag}}, what)
                  : group_->send_async(*tensor, peer, tag);
  std::shared_ptr<ProcessGroup> group = group_;
  return [group, work, tensor, what] { group->wait(work, what); };
}

std::function<void()> ProcessGroupComm::send_and_recv(const torch::Tensor& send, int send_peer, int send_tag,
                                                      torch::Tensor& recv, int recv_peer, int recv_tag) {
  if (!group_->coalesces_point_to_point()) {
    return TensorParallelComm::send_and_recv(send, send_peer, send_tag, recv, recv_peer, recv_tag);
  }
  torch::Tensor sent = send;
  exchange({{true, &sent, send_peer, send_tag}, {false, &recv, recv_peer, recv_tag}});
  return [] {};  // the group's work covered the send
}

void ProcessGroupComm::exchange(const std::vector<Transfer>& transfers) {
  if (!group_->coalesces_point_to_point()) return TensorParallelComm::exchange(transfers);
  std::vector<torch::Tensor> sent;  // contiguous copies of the sends, alive until the group is done
  sent.reserve(transfers.size());
  std::vector<ProcessGroup::PeerOp> ops;
  std::string what = "exchanging with rank";
  std::vector<int> peers;  // world ranks, each once
  for (const Transfer& t : transfers) {
    if (t.send) {
      sent.push_back(t.tensor->contiguous());
      ++stats_.sends;
      stats_.bytes += static_cast<int64_t>(sent.back().nbytes());
    } else {
      TORCH_CHECK(t.tensor->is_contiguous(), "ProcessGroupComm::exchange needs contiguous receiving tensors");
    }
    ops.push_back({t.send, t.send ? &sent.back() : t.tensor, t.peer, t.tag});
    const int peer = group_->world_rank(t.peer);
    if (std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
  }
  if (ops.empty()) return;
  for (size_t i = 0; i < peers.size(); ++i) {
    what += (i == 0 ? (peers.size() > 1 ? "s " : " ") : " and ") + std::to_string(peers[i]);
  }
  const auto start = Clock::now();
  group_->wait(group_->start_point_to_point(ops, what), what);
  stats_.seconds += seconds_since(start);
}

void ProcessGroupComm::recv(torch::Tensor& t, int peer, int tag) {
  TORCH_CHECK(t.is_contiguous(), "ProcessGroupComm::recv needs a contiguous tensor");
  const auto start = Clock::now();
  if (group_->coalesces_point_to_point()) {
    const std::string what = "receiving from rank " + std::to_string(group_->world_rank(peer));
    group_->wait(group_->start_point_to_point({{false, &t, peer, tag}}, what), what);
  } else {
    group_->recv(t, peer, tag);
  }
  stats_.seconds += seconds_since(start);
}

}  // namespace hwt
