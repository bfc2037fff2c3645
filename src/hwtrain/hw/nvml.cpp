// NVML through the process's one loader (obs/nvml_library.h). Declarations follow nvml.h of the driver API; only stable
// entry points (present since driver 450) are used.
#include "hwtrain/hw/nvml.h"

#include "hwtrain/obs/nvml_library.h"

namespace hwt {
namespace {

using Ret = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using Handle = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
constexpr unsigned kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS on Hopper

}  // namespace

std::string describe_links(const NvmlDevice& d) {
  if (d.num_nvlinks > 0) return "NVLink (" + std::to_string(d.num_nvlinks) + " links)";
  if (d.pcie_generation > 0)
    return "PCIe " + std::to_string(d.pcie_generation) + ".0 x" + std::to_string(d.pcie_width);
  return "";
}

NvmlReport query_nvml() {
  NvmlReport r;
  const NvmlLibrary& lib = NvmlLibrary::instance();
  if (!lib.loaded()) {
    r.error = lib.error();
    return r;
  }
  auto count = lib.symbol<Ret (*)(unsigned*)>("nvmlDeviceGetCount_v2");
  auto by_index = lib.symbol<Ret (*)(unsigned, Handle*)>("nvmlDeviceGetHandleByIndex_v2");
  if (count == nullptr || by_index == nullptr) {
    r.error = "libnvidia-ml.so.1 lacks nvmlDeviceGetCount_v2 (driver too old)";
    return r;
  }
  r.loaded = true;
  auto name = lib.symbol<Ret (*)(Handle, char*, unsigned)>("nvmlDeviceGetName");
  auto uuid = lib.symbol<Ret (*)(Handle, char*, unsigned)>("nvmlDeviceGetUUID");
  auto memory = lib.symbol<Ret (*)(Handle, NvmlMemory*)>("nvmlDeviceGetMemoryInfo");
  auto cc = lib.symbol<Ret (*)(Handle, int*, int*)>("nvmlDeviceGetCudaComputeCapability");
  auto nvlink = lib.symbol<Ret (*)(Handle, unsigned, int*)>("nvmlDeviceGetNvLinkState");
  auto pcie_gen = lib.symbol<Ret (*)(Handle, unsigned*)>("nvmlDeviceGetMaxPcieLinkGeneration");
  auto pcie_width = lib.symbol<Ret (*)(Handle, unsigned*)>("nvmlDeviceGetMaxPcieLinkWidth");
  auto driver = lib.symbol<Ret (*)(char*, unsigned)>("nvmlSystemGetDriverVersion");
  auto cuda_driver = lib.symbol<Ret (*)(int*)>("nvmlSystemGetCudaDriverVersion_v2");

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
  return r;
}

}  // namespace hwt
