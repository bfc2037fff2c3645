// The software stack: LibTorch's version and build options (CUDA, OpenMP, oneDNN, MKL), the CUDA,
// cuDNN and NCCL versions it carries (NCCL and cuDNN asked at run time when their libraries are
// loaded, else the build's), the compiler and hwtrain's version. Driver versions come from NVML
// (gpu_info.h) and are filled in by detect_hardware().
#pragma once
#include <string>

#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

SoftwareInfo detect_software();

// NCCL's version code (2.19.3 -> 21903; before 2.9: 2.8.4 -> 2804) as "2.19.3".
std::string nccl_version_string(int code);

}  // namespace hwt
