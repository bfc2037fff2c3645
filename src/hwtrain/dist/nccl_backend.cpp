// ProcessGroupNCCL for CUDA builds (HWTRAIN_CUDA); elsewhere the factory says NCCL is missing.
#include "hwtrain/dist/backend_factory.h"

#include "hwtrain/core/error.h"

#ifdef HWTRAIN_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace hwt {

#ifdef HWTRAIN_CUDA

bool nccl_available() { return true; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    int device_index) {
  // Collectives run on the current device's streams: bind this rank's GPU first.
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
}

#else

bool nccl_available() { return false; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                    std::chrono::milliseconds, int) {
  throw ConfigError("dist.backend = nccl needs a CUDA build of hwtrain; this one has no NCCL (use gloo)");
}

#endif

}  // namespace hwt
