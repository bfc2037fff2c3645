// Data-sheet figures of common accelerators, used to plan on paper (presets) and to fill in what
// detection cannot measure (peak TFLOP/s, link bandwidth) for a detected device of a known model.
// Memory is what CUDA reports as total (a little below the marketed GB); TFLOP/s are dense
// tensor-core peaks with fp32 accumulation; hosts are those of the usual 8-GPU servers (DGX/HGX)
// or a typical workstation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hwt {

struct GpuSpec {
  std::string preset;       // "h100-80gb"
  std::string device_name;  // as cudaGetDeviceProperties names it
  double memory_gib = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int num_sms = 0;
  double bf16_tflops = 0;   // 0 = no bf16 tensor cores
  double fp16_tflops = 0;
  std::string link;         // within a node
  double link_gbs = 0;      // per direction
  int gpus_per_node = 8;
  std::string inter_node_link;
  std::string host_cpu;     // per node
  int host_cores = 0;
  double host_memory_gib = 0;
};

const std::vector<GpuSpec>& gpu_specs();

// The spec whose model a detected device is, by name (and memory for A100 40/80 GB); nullptr
// when the model is not in the table.
const GpuSpec* find_gpu_spec(const std::string& device_name, int64_t total_memory_bytes);

}  // namespace hwt
