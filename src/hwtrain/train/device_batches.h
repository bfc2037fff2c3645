// DeviceBatches: each step's batch on the training device, its host-to-device copy overlapped with
// the step before. On CUDA with pinned batches, next() hands over batch k (the compute stream waits
// on an event for its copy only) and starts copying batch k+1 on a side stream, so that copy runs
// while step k computes; elsewhere it copies on demand. The loader stays the one source of order:
// state() is the position of the batch next() returns next, so checkpoints taken while a batch is
// in flight resume exactly, and restore() drops the batch in flight.
#pragma once
#include <torch/torch.h>

#include <memory>

#include "hwtrain/data/batch_loader.h"

namespace hwt {

struct DeviceBatch {
  torch::Tensor x_NT, y_NT;  // int64 [per_rank, T] on the training device
  double wait_seconds = 0;   // time next() waited for the loader (for this batch and the one it started)
};

class DeviceBatches {
 public:
  // overlap: copy ahead on a side stream (takes effect on a CUDA device with a pinned loader).
  DeviceBatches(BatchLoader& loader, torch::Device device, bool overlap);
  ~DeviceBatches();
  DeviceBatches(const DeviceBatches&) = delete;
  DeviceBatches& operator=(const DeviceBatches&) = delete;

  DeviceBatch next();
  LoaderState state() const;
  void restore(const LoaderState& state);
  // Whether copies run ahead on a side stream (false on CPU, or without pinned batches).
  bool overlapping() const { return side_ != nullptr; }

 private:
  struct InFlight;  // a batch whose copy was started: host tensors kept alive, device tensors, event
  struct SideStream;
  InFlight start_copy();  // takes the loader's next batch and starts copying it on the side stream

  BatchLoader& loader_;
  torch::Device device_;
  std::unique_ptr<SideStream> side_;
  std::unique_ptr<InFlight> pending_;  // the batch in flight, and where the loader stood before it
};

}  // namespace hwt
