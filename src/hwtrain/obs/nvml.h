// Nvml: GPU utilization, memory, temperature and power through NVML, loaded at run time with
// dlopen("libnvidia-ml.so.1") so hwtrain never links it; on machines without the NVIDIA driver
// available() is false and sample() returns nothing. Indices are NVML's (all GPUs of the machine,
// not only those in CUDA_VISIBLE_DEVICES).
#pragma once
#include <vector>

#include "hwtrain/obs/metrics.h"

namespace hwt {

class Nvml {
 public:
  Nvml();   // loads and initializes NVML if present; never throws
  ~Nvml();  // shuts NVML down and unloads it
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool available() const { return lib_ != nullptr; }
  int num_gpus() const { return num_gpus_; }
  // One entry per GPU; fields NVML cannot report stay unknown.
  std::vector<GpuSample> sample() const;

 private:
  struct Api;
  void* lib_ = nullptr;
  Api* api_ = nullptr;
  int num_gpus_ = 0;
};

}  // namespace hwt
