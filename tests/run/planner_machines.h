// The machines and config the planner tests plan for (tests/run/planner_test.cpp, gpu_planner_test.cpp).
#pragma once
#include <stdexcept>
#include <string>

#include "hwtrain/run/run_bindings.h"

namespace hwt {
namespace planner_machines {

inline HardwareProfile cpu_machine(bool bf16_isa, double fp32_gflops, double bf16_gflops) {
  HardwareProfile hw;
  hw.cpu.num_physical_cores = 2;
  hw.cpu.num_logical_threads = 2;
  hw.cpu.isa.avx512f = true;
  hw.cpu.isa.avx512_bf16 = bf16_isa;
  hw.memory.total_bytes = hw.memory.effective_total_bytes = 24ll << 30;
  hw.memory.available_bytes = hw.memory.effective_available_bytes = 20ll << 30;
  hw.math.gemm_measured = true;
  hw.math.fp32_gemm_gflops = fp32_gflops;
  hw.math.bf16_gemm_gflops = bf16_gflops;
  hw.math.gemm_threads = 2;
  return hw;
}

inline HardwareProfile gpu_machine(int cc_major, int64_t memory_bytes = 80ll << 30) {
  HardwareProfile hw = cpu_machine(false, 100, 0);
  GpuInfo g;
  g.name = "Test GPU";
  g.cc_major = cc_major;
  g.total_memory_bytes = memory_bytes;
  g.bf16 = g.tf32 = cc_major >= 8;
  g.usable_by_torch = true;
  g.peak_bf16_tflops = 100;
  hw.gpus.push_back(g);
  return hw;
}

// 4 cores (AVX-512, a measured 200 GFLOP/s fp32 GEMM) and `available_bytes` of memory: the CPU
// processes of a run whose layout is planned (auto_layout_test.cpp, fixed_mesh_plan_test.cpp).
inline HardwareProfile cpu_box(int64_t available_bytes) {
  HardwareProfile hw;
  hw.cpu.num_physical_cores = 4;
  hw.cpu.num_logical_threads = 4;
  hw.cpu.isa.avx512f = true;
  hw.memory.total_bytes = hw.memory.effective_total_bytes = available_bytes + (1ll << 30);
  hw.memory.available_bytes = hw.memory.effective_available_bytes = available_bytes;
  hw.math.gemm_measured = true;
  hw.math.fp32_gemm_gflops = 200;
  hw.math.gemm_threads = 4;
  return hw;
}

inline RunConfig small_config() {
  RunConfig c;
  c.model.vocab_size = 320;
  return c;
}

inline const Decision& decision(const Plan& p, const std::string& name) {
  for (const auto& d : p.decisions) {
    if (d.name == name) return d;
  }
  throw std::runtime_error("no decision " + name);
}

}  // namespace planner_machines
}  // namespace hwt
