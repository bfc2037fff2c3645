// hardware_summary(): the readable form of a HardwareProfile (doctor, the start of a run).
#include <cstdio>
#include <sstream>

#include "hwtrain/core/strings.h"
#include "hwtrain/hw/hardware_profile.h"

namespace hwt {
namespace {

std::string num(double v, int decimals = 0) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string isa_list(const CpuIsa& i) {
  std::vector<std::string> has;
  if (i.sse4_2) has.push_back("SSE4.2");
  if (i.avx2) has.push_back("AVX2");
  if (i.fma) has.push_back("FMA");
  if (i.f16c) has.push_back("F16C");
  if (i.avx512f) {
    std::string s = "AVX-512F";
    if (i.avx512bw) s += "/BW";
    if (i.avx512vl) s += "/VL";
    has.push_back(s);
  }
  if (i.avx512_vnni) has.push_back("AVX512_VNNI");
  if (i.avx512_bf16) has.push_back("AVX512_BF16");
  if (i.amx_tile) has.push_back("AMX-TILE");
  if (i.amx_bf16) has.push_back("AMX-BF16");
  return has.empty() ? "none detected" : join(has, " ");
}

std::string or_unset(const std::string& v) { return v.empty() ? "unset" : v; }

void gemm_line(std::ostream& s, const char* dtype, double gflops, double peak, double eff) {
  s << dtype << " " << (gflops > 0 ? num(gflops, 1) : std::string("n/a")) << " GFLOP/s";
  if (gflops > 0 && peak > 0) s << " (" << num(eff * 100) << "% of " << num(peak) << ")";
}

// The source, the CPU model, cores and threads, ISA, caches and clock.
void cpu_lines(std::ostream& s, const HardwareProfile& p) {
  const CpuInfo& c = p.cpu;
  s << "Hardware (" << p.source << ")\n";
  s << "  CPU       " << (c.model_name.empty() ? "unknown" : c.model_name) << " ("
    << (c.vendor.empty() ? c.arch : c.vendor + ", " + c.arch) << ")\n";
  s << "            " << c.num_physical_cores << " cores / " << c.num_logical_threads
    << " threads usable of " << c.num_online_threads << " online";
  if (c.cgroup_cpu_quota > 0) s << ", cgroup quota " << num(c.cgroup_cpu_quota, 2) << " CPUs";
  s << "\n            ISA: " << isa_list(c.isa) << "\n";
  s << "            L2 " << format_bytes(static_cast<double>(c.l2_cache_bytes)) << "/core, L3 "
    << format_bytes(static_cast<double>(c.l3_cache_bytes));
  if (c.frequency_mhz > 0) s << ", " << num(c.frequency_mhz) << " MHz (" << c.frequency_source << ")";
  s << "\n";
}

// Total, available, cgroup and usable memory.
void memory_line(std::ostream& s, const HardwareProfile& p) {
  const MemoryInfo& m = p.memory;
  s << "  Memory    " << format_bytes(static_cast<double>(m.total_bytes)) << " total, "
    << format_bytes(static_cast<double>(m.available_bytes)) << " available";
  if (m.cgroup_limit_bytes > 0)
    s << "; cgroup limit " << format_bytes(static_cast<double>(m.cgroup_limit_bytes)) << " ("
      << format_bytes(static_cast<double>(m.cgroup_usage_bytes)) << " used)";
  s << "; usable " << format_bytes(static_cast<double>(m.effective_available_bytes)) << "\n";
}

// The BLAS, oneDNN, the measured GEMM rates and the peak assumed.
void math_lines(std::ostream& s, const HardwareProfile& p) {
  const MathLibInfo& x = p.math;
  s << "  BLAS      " << (x.blas.empty() ? "unknown" : x.blas);
  if (!x.blas_version.empty()) s << " (" << x.blas_version << ")";
  if (!x.blas_code_path.empty()) s << ", kernels: " << x.blas_code_path;
  if (x.blas_num_threads > 0) s << ", " << x.blas_num_threads << " threads";
  s << "\n            oneDNN " << (x.onednn_version.empty() ? "absent" : x.onednn_version)
    << "; ATen CPU capability " << (x.cpu_capability.empty() ? "unknown" : x.cpu_capability)
    << "\n";
  s << "  GEMM      ";
  if (x.gemm_measured) {
    gemm_line(s, "fp32", x.fp32_gemm_gflops, x.peak_fp32_gflops, x.fp32_efficiency);
    s << ", ";
    gemm_line(s, "bf16", x.bf16_gemm_gflops, x.peak_bf16_gflops, x.bf16_efficiency);
    s << "; n=" << x.gemm_size << ", " << x.gemm_threads << " threads";
    if (x.gemm_load_average > p.cpu.num_logical_threads)
      s << " (machine busy: load " << num(x.gemm_load_average, 1) << ")";
    s << "\n";
  } else {
    s << "not measured\n";
  }
  if (!x.peak_assumption.empty()) s << "            peak: " << x.peak_assumption << "\n";
}

// The allocator and the thread settings.
void env_lines(std::ostream& s, const HardwareProfile& p) {
  const EnvInfo& e = p.env;
  s << "  Allocator " << to_string(e.allocator);
  if (!e.allocator_detail.empty()) s << " (" << e.allocator_detail << ")";
  s << "\n  Threads   LibTorch " << e.torch_intra_op_threads << " intra-op / "
    << e.torch_inter_op_threads << " inter-op; OMP_NUM_THREADS " << or_unset(e.omp_num_threads)
    << ", MKL_NUM_THREADS " << or_unset(e.mkl_num_threads) << ", OPENBLAS_NUM_THREADS "
    << or_unset(e.openblas_num_threads) << ", OPENBLAS_CORETYPE " << or_unset(e.openblas_coretype)
    << "\n";
}

// Each GPU (a long list of identical ones shortened) and the nodes.
void gpu_lines(std::ostream& s, const HardwareProfile& p) {
  s << "  GPUs      ";
  if (p.gpus.empty()) s << "none\n";
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    // Many identical GPUs (a preset of 64): the first two, a count, the last.
    if (p.gpus.size() > 4 && i >= 2 && i + 1 < p.gpus.size()) {
      if (i == 2) s << "            ... " << p.gpus.size() - 3 << " more\n";
      continue;
    }
    const GpuInfo& g = p.gpus[i];
    if (i > 0) s << "            ";
    s << "[" << g.index << "] " << g.name << ", cc " << g.cc_major << "." << g.cc_minor << ", "
      << format_bytes(static_cast<double>(g.total_memory_bytes));
    if (g.free_memory_bytes > 0)
      s << " (" << format_bytes(static_cast<double>(g.free_memory_bytes)) << " free)";
    // fp8 tensor cores from Ada (8.9) and Hopper (9.0) on: hwtrain does not train in fp8 yet.
    const bool fp8 = g.cc_major * 10 + g.cc_minor >= 89;
    s << (g.bf16 ? ", bf16" : ", no bf16") << (g.tf32 ? ", TF32" : "") << (fp8 ? ", fp8" : "");
    if (g.peak_bf16_tflops > 0) s << ", " << num(g.peak_bf16_tflops) << " TFLOP/s bf16";
    if (!g.interconnect.empty()) s << ", " << g.interconnect;
    if (!g.usable_by_torch) s << ", NOT usable by LibTorch";
    s << "\n";
  }
  if (p.num_nodes > 1) s << "            " << p.num_nodes << " nodes, " << p.inter_node_link << "\n";
}

// LibTorch's build, the compiler, hwtrain, the NVIDIA driver.
void software_lines(std::ostream& s, const HardwareProfile& p) {
  const SoftwareInfo& w = p.software;
  s << "  Software  LibTorch " << (w.torch_version.empty() ? "?" : w.torch_version);
  std::vector<std::string> opts;
  if (w.torch_cuda) {
    std::string cuda = "CUDA " + (w.cuda_build_version.empty() ? "?" : w.cuda_build_version);
    if (!w.cudnn_version.empty()) cuda += ", cuDNN " + w.cudnn_version;
    if (!w.nccl_version.empty()) cuda += ", NCCL " + w.nccl_version;
    opts.push_back(cuda);
  } else {
    opts.push_back("CPU only");
  }
  if (w.torch_openmp) opts.push_back("OpenMP");
  if (w.torch_mkldnn) opts.push_back("oneDNN");
  if (w.torch_mkl) opts.push_back("MKL");
  s << " (" << join(opts) << "), " << w.compiler << ", hwtrain " << w.hwtrain_version << "\n";
  if (!w.gpu_driver_version.empty())
    s << "            NVIDIA driver " << w.gpu_driver_version << " (CUDA " << w.cuda_driver_version
      << ")\n";
}

}  // namespace

std::string hardware_summary(const HardwareProfile& p) {
  std::ostringstream s;
  cpu_lines(s, p);
  memory_line(s, p);
  math_lines(s, p);
  env_lines(s, p);
  gpu_lines(s, p);
  software_lines(s, p);
  return s.str();
}

}  // namespace hwt
