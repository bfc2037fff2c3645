// GPU detection through LibTorch and NVML (see gpu_info.h).
#include "hwtrain/hw/gpu_info.h"

#include <torch/cuda.h>

#include <cstdio>

#include "hwtrain/hw/gpu_specs.h"
#include "hwtrain/hw/nvml.h"

#ifdef HWTRAIN_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace hwt {
namespace {

#ifdef HWTRAIN_CUDA
// cudaDeviceProp::uuid in NVML's spelling: "GPU-" + 8-4-4-4-12 hex digits.
std::string nvml_style_uuid(const cudaDeviceProp& p) {
  std::string s = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(p.uuid.bytes[i]));
    s += hex;
  }
  return s;
}

// Devices LibTorch can use, with NVML's figures merged by UUID.
std::vector<GpuInfo> torch_gpus(const NvmlReport& nvml) {
  std::vector<GpuInfo> gpus;
  int n = static_cast<int>(torch::cuda::device_count());
  for (int i = 0; i < n; ++i) {
    // cudaGetDeviceProperties does not create a context, so no device memory is taken here.
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(i);
    GpuInfo g;
    g.index = i;
    g.usable_by_torch = true;
    g.name = p->name;
    g.cc_major = p->major;
    g.cc_minor = p->minor;
    g.total_memory_bytes = static_cast<int64_t>(p->totalGlobalMem);
    g.num_sms = p->multiProcessorCount;
    std::string uuid = nvml_style_uuid(*p);
    for (const NvmlDevice& d : nvml.devices) {
      if (d.uuid != uuid) continue;
      g.free_memory_bytes = d.free_memory_bytes;
      g.interconnect = describe_links(d);
    }
    gpus.push_back(g);
  }
  return gpus;
}
#endif

}  // namespace

void complete_gpu_info(GpuInfo* g) {
  // Ampere (8.0) and later run bf16 and TF32 on tensor cores; Volta/Turing emulate bf16 slowly.
  g->bf16 = g->cc_major >= 8;
  g->tf32 = g->cc_major >= 8;
  const GpuSpec* spec = find_gpu_spec(g->name, g->total_memory_bytes);
  if (spec == nullptr) return;
  if (g->peak_bf16_tflops == 0) g->peak_bf16_tflops = spec->bf16_tflops;
  if (g->peak_fp16_tflops == 0) g->peak_fp16_tflops = spec->fp16_tflops;
  if (g->link_bandwidth_gbs == 0) g->link_bandwidth_gbs = spec->link_gbs;
  if (g->interconnect.empty()) g->interconnect = spec->link;
  if (g->num_sms == 0) g->num_sms = spec->num_sms;
}

GpuDetection detect_gpus() {
  GpuDetection out;
  NvmlReport nvml = query_nvml();
  out.driver_version = nvml.driver_version;
  out.cuda_driver_version = nvml.cuda_driver_version;
  bool torch_cuda = false;
  try {
    torch_cuda = torch::cuda::is_available();
  } catch (const std::exception&) {
    torch_cuda = false;
  }
#ifdef HWTRAIN_CUDA
  if (torch_cuda) {
    try {
      out.gpus = torch_gpus(nvml);
    } catch (const std::exception&) {
      out.gpus.clear();  // a driver/runtime mismatch: fall back to NVML's view below
    }
  }
#else
  (void)torch_cuda;  // a LibTorch without CUDA headers: only NVML's view
#endif
  if (out.gpus.empty()) {
    // LibTorch cannot use them (CPU-only build, or a driver too old for its CUDA): still list
    // them, so doctor can explain.
    int i = 0;
    for (const NvmlDevice& d : nvml.devices) {
      GpuInfo g;
      g.index = i++;
      g.name = d.name;
      g.cc_major = d.cc_major;
      g.cc_minor = d.cc_minor;
      g.total_memory_bytes = d.total_memory_bytes;
      g.free_memory_bytes = d.free_memory_bytes;
      g.interconnect = describe_links(d);
      g.usable_by_torch = false;
      out.gpus.push_back(g);
    }
  }
  for (GpuInfo& g : out.gpus) complete_gpu_info(&g);
  return out;
}

}  // namespace hwt
