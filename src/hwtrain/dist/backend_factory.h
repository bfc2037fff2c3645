// Factories for the c10d collective backends, each in its own translation unit so that only
// gloo_backend.cpp needs the Gloo declarations (gloo_shim/) and only nccl_backend.cpp the CUDA
// and NCCL headers. Callers see c10d::Backend alone.
#pragma once
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace hwt {

// ProcessGroupGloo over TCP. `bind_host` is the address the other ranks reach this one at:
// a loopback address for single-node runs; empty lets Gloo pick (GLOO_SOCKET_IFNAME, else the
// address this host's name resolves to).
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    const std::string& bind_host);

// True when this build has ProcessGroupNCCL (CUDA builds).
bool nccl_available();

// ProcessGroupNCCL on CUDA device `device_index`; throws ConfigError without CUDA support.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    int device_index);

}  // namespace hwt
