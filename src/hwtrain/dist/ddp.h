// DataParallel: distributed data parallelism for LibTorch, which has no DistributedDataParallel
// in C++. At construction the parameters are broadcast from rank 0 and grouped into buckets of
// about dist.bucket_size_mb, in reverse registration order (the order backward produces their
// gradients). A post hook on each parameter's gradient accumulator notes when its gradient is
// final; when a bucket's gradients are all final, the bucket is copied into a flat buffer,
// divided by the world size and all-reduced asynchronously, so communication overlaps the rest
// of backward. Buckets are launched strictly in order, so every rank issues the same sequence of
// collectives. On micro-steps that do not synchronize (gradient accumulation) the hooks do
// nothing. finish() launches what is left (a parameter without a gradient counts as zeros), waits
// and writes the averages back into .grad. Not here: optimizer sharding (zero1.h).
#pragma once
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "hwtrain/dist/bucketed_broadcast.h"
#include "hwtrain/dist/gradient_hook.h"
#include "hwtrain/dist/gradient_sync.h"
#include "hwtrain/dist/process_group.h"

namespace hwt {

struct DataParallelOptions {
  double bucket_size_mb = 25.0;       // PyTorch DDP's default bucket_cap_mb
  double first_bucket_size_mb = 1.0;  // a small first bucket starts communication early (as DDP does)
  bool broadcast_parameters = true;   // make every rank start from rank 0's weights
};

// Communication measurements for the benchmark (docs/benchmarks.md).
struct CommStats {
  int64_t syncs = 0;            // finish() calls that reduced gradients
  int64_t buckets = 0;          // all-reduces issued
  int64_t bytes = 0;            // bytes all-reduced
  double comm_seconds = 0;      // wall time with at least one all-reduce in flight
  double hidden_seconds = 0;    // the part of comm_seconds before finish() was called, i.e. behind backward
  double finish_seconds = 0;    // time spent in finish() (launching the rest, waiting, copying back)
  // Share of all-reduce time hidden behind backward, in [0, 1].
  double hidden_share() const { return comm_seconds > 0 ? hidden_seconds / comm_seconds : 0.0; }
  CommStats& operator+=(const CommStats& o);
};

class DataParallel : public GradientSync {
 public:
  // `parameters`: the model's parameters in registration order (module->parameters()); those
  // that do not require gradients are ignored. Every rank must pass the same list.
  DataParallel(std::shared_ptr<ProcessGroup> group, std::vector<torch::Tensor> parameters,
               DataParallelOptions options = {});
  ~DataParallel() override;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  void begin_micro_step(bool sync_after_backward) override;
  void finish() override;
  bool collective_started() const override { return armed_ && next_bucket_ > 0; }

  const CommStats& last_stats() const { return last_; }    // of the last finish()
  const CommStats& total_stats() const { return total_; }  // since construction
  // Parameter indices (into the constructor's list) of each bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_layout() const;
  ProcessGroup& group() { return *group_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    size_t bucket;
    int64_t offset;  // in the bucket's flat buffer
    bool ready = false;
  };
  struct Bucket {
    std::vector<size_t> params;
    torch::Tensor flat;  // 1-D, the parameters' dtype and device
    size_t pending = 0;  // gradients not yet final in this backward
    bool launched = false;
    ProcessGroup::WorkPtr work;
    Clock::time_point launched_at;
  };

  void on_gradient_ready(size_t param);
  void launch_ready_buckets();  // in order, stopping at the first bucket not ready
  void launch(size_t bucket);
  void reset_buckets();
  void drain();  // waits for works of an interrupted step and drops them
  void record_stats(Clock::time_point finish_entered);

  std::shared_ptr<ProcessGroup> group_;
  std::vector<torch::Tensor> params_;
  DataParallelOptions options_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<GradientHook> hooks_;
  // Completion times (ns since the clock's epoch) written by the backends' callbacks; shared so a
  // late callback never touches a destroyed object.
  std::shared_ptr<std::vector<std::atomic<int64_t>>> done_ns_;
  std::mutex mutex_;
  size_t next_bucket_ = 0;
  bool armed_ = false;
  CommStats last_, total_;
};

// Broadcasts `tensors` (any dtypes and shapes, on the group's device) from `root` in buckets
// (dist/bucketed_broadcast.h: a large tensor in place, small ones packed, at most two buckets beside
// them; one whole copy per dtype until 2026-11-28); every rank ends with root's values.
void broadcast_tensors(ProcessGroup& group, const std::vector<torch::Tensor>& tensors, int root,
                       const std::string& what = "broadcast", int64_t bucket_bytes = kDefaultBroadcastBucketBytes);

}  // namespace hwt
