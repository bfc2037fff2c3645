// NVIDIA's management library, loaded at run time with dlopen("libnvidia-ml.so.1") and never
// linked: a machine without the driver simply reports no devices. Gives what LibTorch does not:
// free memory without creating a CUDA context, driver version, NVLink / PCIe links.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hwt {

struct NvmlDevice {
  std::string name;
  std::string uuid;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  int cc_major = 0;
  int cc_minor = 0;
  int64_t total_memory_bytes = 0;
  int64_t free_memory_bytes = 0;
  int num_nvlinks = 0;  // active NVLink links
  int pcie_generation = 0;
  int pcie_width = 0;
};

struct NvmlReport {
  bool loaded = false;  // the library was found and initialised
  std::string driver_version;
  std::string cuda_driver_version;  // "13.0": the newest CUDA the driver runs
  std::vector<NvmlDevice> devices;
  std::string error;  // why nothing was reported, for the summary
};

// Queries every device the driver sees (CUDA_VISIBLE_DEVICES does not apply to NVML).
NvmlReport query_nvml();

// "NVLink (18 links)" / "PCIe 5.0 x16" / "".
std::string describe_links(const NvmlDevice& d);

}  // namespace hwt
