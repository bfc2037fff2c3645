// The one translation unit that names c10d::ProcessGroupGloo. The torch wheel exports the class
// from libtorch_cpu but ships no gloo/ headers; gloo_shim/ declares the few Gloo types the header
// mentions (all behind smart pointers), see gloo_shim/README.md.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "hwtrain/dist/backend_factory.h"

namespace hwt {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int world_size, std::chrono::milliseconds timeout,
                                                    const std::string& bind_host) {
  c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> options;
  if (bind_host.empty()) {
    options = c10d::ProcessGroupGloo::Options::create_default(timeout);
  } else {
    options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(bind_host));
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
}

}  // namespace hwt
