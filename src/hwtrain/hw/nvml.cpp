// NVML through dlopen (see nvml.h). Declarations follow nvml.h of the driver API; only stable
// entry points (present since driver 450) are used.
#include "hwtrain/hw/nvml.h"

#include <dlfcn.h>

namespace hwt {
namespace {

using Ret = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using Handle = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
constexpr unsigned kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS on Hopper

template <typename Fn>
Fn sym(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

}  // namespace

std::string describe_links(const NvmlDevice& d) {
  if (d.num_nvlinks > 0) return "NVLink (" + std::to_string(d.num_nvlinks) + " links)";
  if (d.pcie_generation > 0)
    return "PCIe " + std::to_string(d.pcie_generation) + ".0 x" + std::to_string(d.pcie_width);
  return "";
}

NvmlReport query_nvml() {
  NvmlReport r;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) {
    r.error = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
    return r;
  }
  auto init = sym<Ret (*)()>(lib, "nvmlInit_v2");
  auto shutdown = sym<Ret (*)()>(lib, "nvmlShutdown");
  auto count = sym<Ret (*)(unsigned*)>(lib, "nvmlDeviceGetCount_v2");
  auto by_index = sym<Ret (*)(unsigned, Handle*)>(lib, "nvmlDeviceGetHandleByIndex_v2");
  if (init == nullptr || shutdown == nullptr || count == nullptr || by_index == nullptr) {
    r.error = "libnvidia-ml.so.1 lacks nvmlInit_v2 (driver too old)";
    dlclose(lib);
    return r;
  }
  if (init() != 0) {
    r.error = "nvmlInit failed (driver not loaded)";
    dlclose(lib);
    return r;
  }
  r.loaded = true;
  auto name = sym<Ret (*)(Handle, char*, unsigned)>(lib, "nvmlDeviceGetName");
  auto uuid = sym<Ret (*)(Handle, char*, unsigned)>(lib, "nvmlDeviceGetUUID");
  auto memory = sym<Ret (*)(Handle, NvmlMemory*)>(lib, "nvmlDeviceGetMemoryInfo");
  auto cc = sym<Ret (*)(Handle, int*, int*)>(lib, "nvmlDeviceGetCudaComputeCapability");
  auto nvlink = sym<Ret (*)(Handle, unsigned, int*)>(lib, "nvmlDeviceGetNvLinkState");
  auto pcie_gen = sym<Ret (*)(Handle, unsigned*)>(lib, "nvmlDeviceGetMaxPcieLinkGeneration");
  auto pcie_width = sym<Ret (*)(Handle, unsigned*)>(lib, "nvmlDeviceGetMaxPcieLinkWidth");
  auto driver = sym<Ret (*)(char*, unsigned)>(lib, "nvmlSystemGetDriverVersion");
  auto cuda_driver = sym<Ret (*)(int*)>(lib, "nvmlSystemGetCudaDriverVersion_v2");

  char buf[128] = {};
  if (driver != nullptr && driver(buf, sizeof(buf)) == 0) r.driver_version = buf;
  int cuda = 0;
  if (cuda_driver != nullptr && cuda_driver(&cuda) == 0 && cuda > 0)
    r.cuda_driver_version = std::to_string(cuda / 1000) + "." + std::to_string((cuda % 1000) / 10);

  unsigned n = 0;
  if (count(&n) != 0) n = 0;
  for (unsigned i = 0; i < n; ++i) {
    Handle h = nullptr;
    if (by_index(i, &h) != 0) continue;
    NvmlDevice d;
    if (name != nullptr && name(h, buf, sizeof(buf)) == 0) d.name = buf;
    if (uuid != nullptr && uuid(h, buf, sizeof(buf)) == 0) d.uuid = buf;
    NvmlMemory mem{};
    if (memory != nullptr && memory(h, &mem) == 0) {
      d.total_memory_bytes = static_cast<int64_t>(mem.total);
      d.free_memory_bytes = static_cast<int64_t>(mem.free);
    }
    if (cc != nullptr) cc(h, &d.cc_major, &d.cc_minor);
    if (nvlink != nullptr) {
      for (unsigned link = 0; link < kMaxNvLinks; ++link) {
        int active = 0;
        if (nvlink(h, link, &active) == 0 && active == 1) ++d.num_nvlinks;
      }
    }
    unsigned v = 0;
    if (pcie_gen != nullptr && pcie_gen(h, &v) == 0) d.pcie_generation = static_cast<int>(v);
    if (pcie_width != nullptr && pcie_width(h, &v) == 0) d.pcie_width = static_cast<int>(v);
    r.devices.push_back(d);
  }
  shutdown();
  // The library stays loaded: unloading NVML while the CUDA driver holds it is not worth the risk.
  return r;
}

}  // namespace hwt
