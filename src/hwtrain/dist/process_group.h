// ProcessGroup: one rank's membership in a distributed run, on PyTorch's c10d.
// Construction is the rendezvous: a c10d::TCPStore served by rank 0 at MASTER_ADDR:MASTER_PORT,
// a join check that names missing ranks, then the collective backend (ProcessGroupGloo on CPU,
// ProcessGroupNCCL on CUDA builds). A heartbeat thread publishes this rank's liveness and progress
// through the store, so that when a collective fails or times out the error names the rank to
// blame (died, stopped, failed with an error, or hung behind the others). Every wait is bounded by
// dist.timeout; a rank started by `hwtrain launch` also keeps a liveness file fresh, so that the
// launcher stops the run when a rank is frozen (liveness.h). Not here: what is communicated (ddp.h, zero1.h) and starting processes (launcher.h).
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/dist/dist_config.h"
#include "hwtrain/dist/dist_env.h"

namespace hwt {

class Heartbeat;
class LivenessBeacon;

class ProcessGroup {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;

  // Rendezvous and backend creation. `device` is this rank's device: CUDA selects NCCL under
  // dist.backend = auto (use rank_device() to pick it from LOCAL_RANK). Throws ConfigError for a
  // port in use or a bad backend, DistError for an unreachable master or ranks that never join.
  ProcessGroup(const DistEnv& env, const DistConfig& config, torch::Device device = torch::kCPU);
  // A clean shutdown(), or, while an exception unwinds or after a failed collective, abandon():
  // this rank is marked failed and the backend's threads (possibly blocked on a dead peer) are
  // left to process exit instead of being joined.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  torch::Device device() const { return device_; }
  const std::string& backend_name() const { return backend_name_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Asynchronous collectives over tensors on device(); finish them with wait().
  WorkPtr all_reduce_sum(torch::Tensor& tensor);
  WorkPtr broadcast(torch::Tensor& tensor, int root);
  // `output` (contiguous, world_size x input.numel() elements) receives every rank's `input`, rank
  // order. On Gloo, one in-place broadcast per rank into the slices of `output` (Gloo's own
  // all-gather receives into a whole-size buffer of its own and copies it out: twice the memory).
  WorkPtr all_gather_into(torch::Tensor& output, torch::Tensor& input);
  // `output` (input.numel() / world_size elements) receives this rank's slice of the ranks' sum.
  WorkPtr reduce_scatter_sum(torch::Tensor& output, torch::Tensor& input);
  // The same reduce-scatter of a flat `input` the caller gives up: its contents are unspecified
  // afterwards, and `shard` is set to this rank's slice of the sum, valid after wait(). On Gloo
  // (whose reduce-scatter all-reduces a whole clone of the input) the input is all-reduced in place
  // and `shard` is a view of it: no second whole-size buffer. Elsewhere `shard` is a new tensor.
  WorkPtr reduce_scatter_in_place(torch::Tensor& input, torch::Tensor& shard);
  // Whether reduce_scatter_in_place of tensors like `t` is an all-reduce (Gloo on the CPU): then a
  // caller may all-reduce the pieces of its input where they are instead of packing them first.
  bool reduces_by_all_reduce(const torch::Tensor& t) const;
  // Gloo: blocks until `work` completes, at most dist.timeout. On failure throws DistError:
  // "<what> failed: <backend error>; <which rank is to blame>". NCCL: the current CUDA stream waits
  // for the work, not the host (reading a result on the host, .item() or a copy, waits for it); a
  // work that fails or outlives dist.timeout is ended by NCCL's watchdog, which ends the process.
  void wait(const WorkPtr& work, const std::string& what);
  // Blocking point-to-point transfers (gathering sharded state on rank 0).
  void send(torch::Tensor& tensor, int dst, int tag);
  // The same send, finished later with wait() (pipeline stages: a stage must not wait for its own
  // send before it receives, or two neighbours sending to each other wait forever).
  WorkPtr send_async(torch::Tensor& tensor, int dst, int tag);
  void recv(torch::Tensor& tensor, int src, int tag);
  // Point-to-point operations issued as one group (NCCL: one coalesced launch over the group's
  // communicator, as batch_isend_irecv), finished together by the returned work. Only where
  // coalesces_point_to_point(). On NCCL a lone send or receive goes over a separate two-rank
  // communicator whose messages never match a group's, so a caller that groups some operations
  // between two ranks must group all of them (ProcessGroupComm does). `tensor`s must outlive the work.
  struct PeerOp {
    bool send = true;
    torch::Tensor* tensor = nullptr;
    int peer = 0, tag = 0;
  };
  bool coalesces_point_to_point() const;
  WorkPtr start_point_to_point(const std::vector<PeerOp>& ops, const std::string& what);
  void barrier(const std::string& what);

  // Start-up check that every rank runs the same thing: each publishes `fingerprint` (lines of
  // "key=value": model config, seed, dataset fingerprint, world size...) and compares it with
  // rank 0's. A difference is a ConfigError naming the rank and the first differing line.
  void check_consistency(const std::string& fingerprint);

  // Small agreements, blocking: the mean of a scalar over the ranks (the global batch's loss
  // from the ranks' slices), and whether any rank says yes (a stop request, an OOM).
  double mean_across_ranks(double value, const std::string& what = "averaging a metric");
  bool any_rank(bool flag, const std::string& what = "agreeing on a decision");

  // Rank 0's `value` on every rank, through the store (e.g. the run directory rank 0 created).
  // The others wait up to `timeout` (default dist.timeout; longer for work only rank 0 does,
  // such as preparing a dataset), or until rank 0 is seen gone.
  std::string share_from_rank0(const std::string& key, const std::string& value,
                               std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // A clean end: marks this rank done; rank 0, which serves the store, waits (up to the timeout)
  // until the other ranks are done before it goes. The group is unusable afterwards.
  void shutdown();
  // Marks this rank failed and stops without waiting for anyone (the destructor's error path).
  void abandon();

  // What the heartbeats say about the other ranks, waiting briefly for evidence (a dead peer is
  // seen as stale only a few heartbeat intervals after it died): "rank 1 stopped responding ...".
  std::string blame();

  // A group of some of this group's ranks (`ranks`: ascending ranks of this group, this rank among
  // them) with its own backend over this group's store, its keys under "sub/<name>/": a mesh's
  // tensor-, pipeline- or data-parallel group (dist/device_mesh.h). Every member creates it with the
  // same name and ranks (one Gloo connection per pair of members, no collective over the others). Its
  // rank() and world_size() count its members; its waits are bounded by the same timeout and blame a
  // failure through this group's heartbeats. This group must outlive it.
  std::shared_ptr<ProcessGroup> subgroup(const std::vector<int>& ranks, const std::string& name);
  // This group's rank `rank` in the world (the group created from the environment).
  int world_rank(int rank) const { return members_.empty() ? rank : members_.at(static_cast<size_t>(rank)); }

  c10d::Store& store() { return *store_; }  // hwtrain's own keys live under "hwt/"
  c10d::Backend& backend() { return *backend_; }

 private:
  struct SubgroupTag {};
  ProcessGroup(SubgroupTag, ProcessGroup& parent, std::vector<int> members, const std::string& name);
  void await_ranks(const std::string& master);
  void create_backend(const DistEnv& env, const std::string& backend);
  [[noreturn]] void fail(const std::string& what, const std::string& error);

  int rank_, world_size_;
  torch::Device device_;
  std::string backend_name_;
  std::string master_;  // "addr:port", for messages
  std::string bind_host_;  // Gloo's address for this rank: loopback on one node, else empty (Gloo's choice)
  ProcessGroup* parent_ = nullptr;  // a subgroup's world group (heartbeats, blame)
  std::vector<int> members_;        // a subgroup's members as world ranks; empty for the world group
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  std::unique_ptr<LivenessBeacon> liveness_;  // for `hwtrain launch` (liveness.h), when it started us
  std::unique_ptr<Heartbeat> heartbeat_;
  // Collectives this rank has finished (its progress), shared with the heartbeat thread.
  std::shared_ptr<std::atomic<int64_t>> completed_ = std::make_shared<std::atomic<int64_t>>(0);
  bool failed_ = false;
  bool closed_ = false;
};

// This rank's device for a planned device type: cuda:LOCAL_RANK for CUDA (HardwareError when
// LOCAL_RANK has no GPU), the CPU otherwise.
torch::Device rank_device(const DistEnv& env, torch::Device planned);

}  // namespace hwt
