// The accelerator table (see gpu_specs.h). Sources: NVIDIA data sheets (A100, H100, H200, L4)
// and the Ada architecture whitepaper (RTX 4090: 165 TFLOP/s bf16 with fp32 accumulate).
#include "hwtrain/hw/gpu_specs.h"

namespace hwt {

const std::vector<GpuSpec>& gpu_specs() {
  static const std::vector<GpuSpec> specs = {
      {"a100-40gb", "NVIDIA A100-SXM4-40GB", 39.4, 8, 0, 108, 312, 312, "NVLink 3 (12 links)", 300,
       8, "InfiniBand HDR 8x200 Gb/s", "2x AMD EPYC 7742", 128, 1024},
      {"a100-80gb", "NVIDIA A100-SXM4-80GB", 79.2, 8, 0, 108, 312, 312, "NVLink 3 (12 links)", 300,
       8, "InfiniBand HDR 8x200 Gb/s", "2x AMD EPYC 7742", 128, 2048},
      {"h100-80gb", "NVIDIA H100 80GB HBM3", 79.1, 9, 0, 132, 989, 989, "NVLink 4 (18 links)", 450,
       8, "InfiniBand NDR 8x400 Gb/s", "2x Intel Xeon Platinum 8480C", 112, 2048},
      {"h100-pcie", "NVIDIA H100 PCIe", 79.6, 9, 0, 114, 756, 756, "PCIe 5.0 x16", 64, 8,
       "Ethernet 200 Gb/s", "2x Intel Xeon Platinum 8480+", 112, 1024},
      {"h200", "NVIDIA H200", 139.8, 9, 0, 132, 989, 989, "NVLink 4 (18 links)", 450, 8,
       "InfiniBand NDR 8x400 Gb/s", "2x Intel Xeon Platinum 8480C", 112, 2048},
      {"l4", "NVIDIA L4", 22.0, 8, 9, 58, 121, 121, "PCIe 4.0 x16", 32, 8, "Ethernet 100 Gb/s",
       "Intel Xeon (Cascade Lake), 96 vCPU", 48, 384},
      {"rtx4090", "NVIDIA GeForce RTX 4090", 23.6, 8, 9, 128, 165, 165,
       "PCIe 4.0 x16 (no P2P)", 32, 4, "Ethernet 25 Gb/s", "AMD Ryzen Threadripper 7960X", 24,
       256},
      // Volta: no bf16; fp16 with loss scaling is the fast path there.
      {"v100-32gb", "Tesla V100-SXM2-32GB", 31.7, 7, 0, 80, 0, 125, "NVLink 2 (6 links)", 150, 8,
       "InfiniBand EDR 4x100 Gb/s", "2x Intel Xeon E5-2698 v4", 40, 512},
  };
  return specs;
}

const GpuSpec* find_gpu_spec(const std::string& device_name, int64_t total_memory_bytes) {
  double gib = static_cast<double>(total_memory_bytes) / (1024.0 * 1024.0 * 1024.0);
  auto has = [&](const char* part) { return device_name.find(part) != std::string::npos; };
  auto by_preset = [](const std::string& preset) -> const GpuSpec* {
    for (const GpuSpec& s : gpu_specs())
      if (s.preset == preset) return &s;
    return nullptr;
  };
  if (has("A100")) return by_preset(gib > 60 ? "a100-80gb" : "a100-40gb");
  if (has("H100") && has("PCIe")) return by_preset("h100-pcie");
  if (has("H100")) return by_preset("h100-80gb");
  if (has("H200")) return by_preset("h200");
  if (has("RTX 4090")) return by_preset("rtx4090");
  if (has("V100") && gib > 20) return by_preset("v100-32gb");
  // "NVIDIA L4" must not match "NVIDIA L40".
  if (device_name == "NVIDIA L4") return by_preset("l4");
  return nullptr;
}

}  // namespace hwt
