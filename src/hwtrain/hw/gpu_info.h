// GPU detection. LibTorch decides which GPUs a run can use (CUDA build, driver,
// CUDA_VISIBLE_DEVICES); NVML (dlopen'ed) adds free memory, links and the driver version without
// creating a CUDA context. GPUs NVML sees that LibTorch cannot use are listed with
// usable_by_torch = false, so doctor can say why. No driver, no GPU: an empty list, no error.
#pragma once
#include <string>
#include <vector>

#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

struct GpuDetection {
  std::vector<GpuInfo> gpus;
  std::string driver_version;
  std::string cuda_driver_version;
};

GpuDetection detect_gpus();

// Fills bf16/tf32 from the compute capability and peaks/links from the spec table when the
// model is known (fields already set are kept).
void complete_gpu_info(GpuInfo* gpu);

}  // namespace hwt
