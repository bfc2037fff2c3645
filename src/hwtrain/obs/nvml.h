// Nvml: GPU utilization, memory, temperature and power through NVML (obs/nvml_library.h: loaded at
// run time, never linked); on machines without the NVIDIA driver available() is false and sample()
// returns nothing. Indices are NVML's (all GPUs of the machine,
// not only those in CUDA_VISIBLE_DEVICES).
#pragma once
#include <vector>

#include "hwtrain/obs/metrics.h"

namespace hwt {

class Nvml {
 public:
  Nvml();  // binds the sampling entry points if NVML is present; never throws
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool available() const { return api_ != nullptr; }
  int num_gpus() const { return num_gpus_; }
  // One entry per GPU; fields NVML cannot report stay unknown.
  std::vector<GpuSample> sample() const;

 private:
  struct Api;
  Api* api_ = nullptr;
  int num_gpus_ = 0;
};

}  // namespace hwt
