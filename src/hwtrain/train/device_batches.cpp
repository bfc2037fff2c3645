#include "hwtrain/train/device_batches.h"

#ifdef HWTRAIN_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace hwt {

#ifdef HWTRAIN_CUDA
struct DeviceBatches::SideStream {
  c10::cuda::CUDAStream stream;
};
struct DeviceBatches::InFlight {
  LoaderState from;  // the loader's state before this batch: where a checkpoint resumes
  LoadedBatch host;  // pinned: must outlive the asynchronous copy
  torch::Tensor x_NT, y_NT;
  at::cuda::CUDAEvent copied;
};
#else
struct DeviceBatches::SideStream {};
struct DeviceBatches::InFlight {
  LoaderState from;
  LoadedBatch host;
  torch::Tensor x_NT, y_NT;
};
#endif

DeviceBatches::DeviceBatches(BatchLoader& loader, torch::Device device, bool overlap)
    : loader_(loader), device_(device) {
#ifdef HWTRAIN_CUDA
  if (overlap && device_.is_cuda() && loader_.pinned()) {
    side_ = std::make_unique<SideStream>(SideStream{c10::cuda::getStreamFromPool(false, device_.index())});
  }
#else
  (void)overlap;
#endif
}

DeviceBatches::~DeviceBatches() = default;

DeviceBatches::InFlight DeviceBatches::start_copy() {
  InFlight f;
  f.from = loader_.state();
  f.host = loader_.next();
#ifdef HWTRAIN_CUDA
  c10::cuda::CUDAStreamGuard guard(side_->stream);
  f.x_NT = f.host.x_NT.to(device_, /*non_blocking=*/true);
  f.y_NT = f.host.y_NT.to(device_, /*non_blocking=*/true);
  f.copied.record(side_->stream);
#endif
  return f;
}

DeviceBatch DeviceBatches::next() {
  DeviceBatch out;
  if (!side_) {  // copy on demand (a no-op on CPU)
    LoadedBatch b = loader_.next();
    out.x_NT = b.x_NT.to(device_, /*non_blocking=*/true);
    out.y_NT = b.y_NT.to(device_, /*non_blocking=*/true);
    out.wait_seconds = b.wait_seconds;
    return out;
  }
#ifdef HWTRAIN_CUDA
  if (!pending_) {
    pending_ = std::make_unique<InFlight>(start_copy());
    out.wait_seconds += pending_->host.wait_seconds;
  }
  InFlight current = std::move(*pending_);
  pending_.reset();
  // The compute stream waits for this batch's copy only; the tensors were allocated on the side
  // stream, so the caching allocator must not reuse them there before compute is done with them.
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
  current.copied.block(compute);
  for (const auto& t : {current.x_NT, current.y_NT}) {
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), compute);
  }
  out.x_NT = current.x_NT;
  out.y_NT = current.y_NT;
  // Batch k+1 starts copying now and overlaps step k.
  pending_ = std::make_unique<InFlight>(start_copy());
  out.wait_seconds += pending_->host.wait_seconds;
#endif
  return out;
}

LoaderState DeviceBatches::state() const { return pending_ ? pending_->from : loader_.state(); }

void DeviceBatches::restore(const LoaderState& state) {
#ifdef HWTRAIN_CUDA
  if (pending_) pending_->copied.synchronize();  // its pinned host memory is freed with it
#endif
  pending_.reset();
  loader_.restore(state);
}

}  // namespace hwt
