// Hardware presets (see hardware_preset.h).
#include "hwtrain/hw/hardware_preset.h"

#include <torch/version.h>

#include "hwtrain/core/error.h"
#include "hwtrain/hw/gpu_info.h"
#include "hwtrain/hw/gpu_specs.h"

namespace hwt {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// A CUDA context plus cuBLAS/NCCL workspaces take about this much of each GPU before training.
constexpr double kContextGiB = 0.5;

// Per-GPU bandwidth to other nodes, GB/s per direction, by preset: the node's NICs (gpu_specs.cpp's
// inter_node_link) divided by its GPUs. DGX A100: 8 HDR InfiniBand 200 Gb/s adapters, one per GPU
// (NVIDIA DGX A100 user guide) -> 25 GB/s; DGX H100 / HGX H200: 8 NDR 400 Gb/s ConnectX-7, one per
// GPU (DGX H100 user guide) -> 50 GB/s; DGX-1V: 4 EDR 100 Gb/s for 8 GPUs -> 6.25 GB/s; the PCIe
// and workstation presets: one Ethernet NIC per node shared by its GPUs.
struct InterNodeFigure {
  const char* preset;
  double gbs_per_gpu;
};
constexpr InterNodeFigure kInterNode[] = {
    {"a100-40gb", 25.0}, {"a100-80gb", 25.0},       {"h100-80gb", 50.0},          {"h200", 50.0},
    {"h100-pcie", 25.0 / 8}, {"l4", 12.5 / 8}, {"rtx4090", 3.125 / 4}, {"v100-32gb", 4 * 12.5 / 8},
};

}  // namespace

std::vector<std::string> hardware_preset_names() {
  std::vector<std::string> names;
  for (const GpuSpec& s : gpu_specs()) names.push_back(s.preset);
  return names;
}

double inter_node_gbs_per_gpu(const HardwareProfile& hw) {
  if (hw.num_nodes <= 1 || hw.gpus.empty()) return 0.0;
  const GpuSpec* spec = find_gpu_spec(hw.gpus.front().name, hw.gpus.front().total_memory_bytes);
  if (spec == nullptr) return 0.0;
  for (const InterNodeFigure& f : kInterNode)
    if (spec->preset == f.preset) return f.gbs_per_gpu;
  return 0.0;
}

std::optional<HardwareProfile> hardware_preset(const std::string& name, int num_gpus, int num_nodes) {
  const GpuSpec* spec = nullptr;
  for (const GpuSpec& s : gpu_specs())
    if (s.preset == name) spec = &s;
  if (spec == nullptr) return std::nullopt;
  if (num_gpus < 1)
    throw HardwareError("hardware preset '" + name + "': num_gpus must be at least 1, found " +
                        std::to_string(num_gpus));
  HardwareProfile p;
  p.source = "preset:" + name;
  p.num_nodes = num_nodes > 0 ? num_nodes : (num_gpus + spec->gpus_per_node - 1) / spec->gpus_per_node;
  p.inter_node_link = p.num_nodes > 1 ? spec->inter_node_link : "";

  // The host of one node. Every such server CPU has at least AVX2; finer ISA details do not
  // matter when the GPUs do the math.
  p.cpu.arch = "x86_64";
  p.cpu.vendor = spec->host_cpu.find("AMD") != std::string::npos ? "AuthenticAMD" : "GenuineIntel";
  p.cpu.model_name = spec->host_cpu;
  p.cpu.num_physical_cores = spec->host_cores;
  p.cpu.num_logical_threads = 2 * spec->host_cores;
  p.cpu.num_online_threads = 2 * spec->host_cores;
  p.cpu.isa.sse4_2 = p.cpu.isa.avx2 = p.cpu.isa.fma = p.cpu.isa.f16c = true;
  p.memory.total_bytes = static_cast<int64_t>(spec->host_memory_gib * kGiB);
  p.memory.available_bytes = p.memory.total_bytes;
  p.memory.effective_total_bytes = p.memory.total_bytes;
  p.memory.effective_available_bytes = p.memory.total_bytes;
  p.env.allocator = Allocator::Jemalloc;  // the hwtrain binary links it
  p.env.torch_intra_op_threads = spec->host_cores / spec->gpus_per_node;
  p.env.torch_inter_op_threads = 1;

  for (int i = 0; i < num_gpus; ++i) {
    GpuInfo g;
    g.index = i;
    g.name = spec->device_name;
    g.cc_major = spec->cc_major;
    g.cc_minor = spec->cc_minor;
    g.total_memory_bytes = static_cast<int64_t>(spec->memory_gib * kGiB);
    g.free_memory_bytes = static_cast<int64_t>((spec->memory_gib - kContextGiB) * kGiB);
    g.num_sms = spec->num_sms;
    g.peak_bf16_tflops = spec->bf16_tflops;
    g.peak_fp16_tflops = spec->fp16_tflops;
    g.interconnect = spec->link;
    g.link_bandwidth_gbs = spec->link_gbs;
    g.usable_by_torch = true;
    complete_gpu_info(&g);
    p.gpus.push_back(g);
  }
  p.software.torch_version = TORCH_VERSION;
  p.software.torch_cuda = true;
  p.software.compiler = "preset";
  return p;
}

}  // namespace hwt
