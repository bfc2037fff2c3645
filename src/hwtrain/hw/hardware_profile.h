// HardwareProfile: what this machine (or a machine described in a file or preset) offers for
// training: CPU and its ISA, memory and cgroup limits, the math libraries LibTorch uses and how
// fast its GEMMs run, the process environment that changes speed, GPUs, and the software stack.
// Plain values, serializable to JSON; detect_hardware() fills one for this process, the planner
// and `hwtrain doctor` read it. Detection never throws for a missing device or file: absent
// things read as 0 / "" / false. hardware_from_json() is strict and throws HardwareError.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace hwt {

// ISA features as usable by this process: cpuid says the CPU has it AND the OS saves the register
// state (xgetbv), so an AVX-512 CPU under a kernel that disables AVX-512 reads as no AVX-512.
struct CpuIsa {
  bool sse4_2 = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
};

struct CpuInfo {
  std::string arch;        // "x86_64", "aarch64"
  std::string vendor;      // cpuid vendor: "AuthenticAMD", "GenuineIntel"; "" when unknown
  std::string model_name;  // brand string, e.g. "AMD EPYC 9R14 96-Core Processor"
  int family = 0;          // cpuid display family (0x19 = Zen 3/4, 0x1A = Zen 5, 6 = Intel Core)
  int model = 0;           // cpuid display model
  // Usable by this process: the affinity mask, capped by the cgroup CPU quota (rounded up).
  int num_physical_cores = 0;
  int num_logical_threads = 0;
  int num_online_threads = 0;  // all online hardware threads of the machine
  double cgroup_cpu_quota = 0;  // CPUs allowed by cgroup cpu.max / cfs_quota; 0 = no limit
  CpuIsa isa;
  bool os_avx512_state = false;  // XCR0 enables opmask + ZMM state (false hides AVX-512)
  bool os_amx_state = false;     // XCR0 enables tile state
  int64_t l2_cache_bytes = 0;    // per core
  int64_t l3_cache_bytes = 0;    // the L3 cpu0 sees (one CCX on AMD)
  double frequency_mhz = 0;      // core clock used for peak FLOPs; 0 = unknown
  std::string frequency_source;  // "measured", "cpufreq max", "/proc/cpuinfo", "brand string"
};

struct MemoryInfo {
  int64_t total_bytes = 0;         // MemTotal
  int64_t available_bytes = 0;     // MemAvailable
  int64_t cgroup_limit_bytes = 0;  // memory.max / limit_in_bytes; 0 = no limit
  int64_t cgroup_usage_bytes = 0;  // usage minus inactive file pages (what the OOM killer sees)
  int64_t effective_total_bytes = 0;      // min(total, cgroup limit)
  int64_t effective_available_bytes = 0;  // min(available, cgroup limit - usage)
};

struct MathLibInfo {
  std::string blas;               // "mkl", "openblas", "blis", "accelerate", "reference", "unknown"
  std::string blas_version;       // as LibTorch (or the loaded library) reports it
  std::string blas_core_type;     // OpenBLAS kernel core type actually loaded ("Haswell"), "" if n/a
  std::string blas_code_path;     // kernels the BLAS dispatched to: "AVX-512", "generic (SSE2)", ""
  int blas_num_threads = 0;       // the BLAS library's own thread pool size; 0 = unknown
  std::string onednn_version;     // "3.10.2"; "" without oneDNN
  std::string cpu_capability;     // ATen's dispatch level: "AVX512", "AVX2", "DEFAULT"
  // Microbenchmark of square matmuls through LibTorch (0 = not measured).
  bool gemm_measured = false;
  int gemm_threads = 0;           // intra-op threads during the benchmark
  int gemm_size = 0;              // n of the n x n x n products timed
  double fp32_gemm_gflops = 0;
  double bf16_gemm_gflops = 0;    // 0 when bf16 matmul failed
  double gemm_load_average = 0;   // 1-min load average when measured: above the thread count,
                                  // other processes shared the cores and the rates read low
  // What the ISA allows at gemm_threads cores (see peak_flops.h for the assumptions).
  double peak_fp32_gflops_per_core = 0;
  double peak_bf16_gflops_per_core = 0;
  double peak_fp32_gflops = 0;
  double peak_bf16_gflops = 0;
  double fp32_efficiency = 0;     // measured / peak, 0 when either is unknown
  double bf16_efficiency = 0;
  std::string peak_assumption;    // one line: FLOP/cycle, frequency, why

  // Under this share of a dtype's ISA peak the probe measured its neighbours, not the machine
  // (issue 19, defect 6: fp32 at 5.6 GFLOP/s of 333 while another rank probed; bf16 at 1 of 5325
  // beside busy processes). Idle, a good BLAS reaches 50-95% in fp32 and AMX 25-35% in bf16.
  static constexpr double kContendedShare = 0.1;
  // Whether a rate reads under that share of a known peak (0 counts as under: no rate).
  static bool below_contended_share(double gflops, double peak_gflops) {
    return peak_gflops > 0 && gflops < kContendedShare * peak_gflops;
  }
  // Whether bf16 has native kernels here (AVX512_BF16 or AMX: a peak above fp32's); without them
  // bf16 GEMMs are emulated in scalar code at ~1% of the fp32 peak, which is the machine, not a neighbour.
  static bool native_bf16_peak(double bf16_peak, double fp32_peak) { return bf16_peak > fp32_peak; }
  // Whether either measured rate is that contended reading: the planner then goes by the ISA instead.
  bool gemm_contended() const {
    const auto low = [](double gflops, double peak) { return gflops > 0 && below_contended_share(gflops, peak); };
    return gemm_measured && (low(fp32_gemm_gflops, peak_fp32_gflops) ||
                             (native_bf16_peak(peak_bf16_gflops, peak_fp32_gflops) &&
                              low(bf16_gemm_gflops, peak_bf16_gflops)));
  }
};

enum class Allocator { Glibc, Jemalloc, Tcmalloc, Mimalloc, Other };
std::string to_string(Allocator a);

struct EnvInfo {
  Allocator allocator = Allocator::Other;
  std::string allocator_detail;  // library that provides malloc, version, config
  int64_t jemalloc_dirty_decay_ms = 0;  // jemalloc's opt.dirty_decay_ms (-1: never purges)
  // Environment variables as set ("" = unset; the thread counts are "''" when set to nothing).
  std::string omp_num_threads;
  std::string mkl_num_threads;
  std::string openblas_num_threads;
  std::string openblas_coretype;
  std::string malloc_arena_max;
  std::string malloc_conf;
  std::string ld_preload;
  int torch_intra_op_threads = 0;
  int torch_inter_op_threads = 0;
};

struct GpuInfo {
  int index = 0;
  std::string name;
  int cc_major = 0;  // compute capability
  int cc_minor = 0;
  int64_t total_memory_bytes = 0;
  int64_t free_memory_bytes = 0;  // 0 when unknown (preset or no NVML)
  int num_sms = 0;
  bool bf16 = false;  // native bf16 tensor cores (cc >= 8.0)
  bool tf32 = false;  // TF32 tensor cores (cc >= 8.0)
  double peak_bf16_tflops = 0;   // dense tensor-core peak, fp32 accumulate; 0 = unknown/none
  double peak_fp16_tflops = 0;   // the same for fp16
  std::string interconnect;      // "NVLink (18 links)", "PCIe 4.0 x16", "" = unknown
  double link_bandwidth_gbs = 0; // GB/s per direction to a peer in the node; 0 = unknown
  bool usable_by_torch = false;  // LibTorch can run on it (CUDA build + driver)
};

struct SoftwareInfo {
  std::string torch_version;  // TORCH_VERSION
  bool torch_cuda = false;    // LibTorch built with CUDA
  bool torch_openmp = false;
  bool torch_mkldnn = false;
  bool torch_mkl = false;
  std::string parallel_backend;      // "OpenMP", "native"
  std::string cuda_build_version;    // CUDA LibTorch was built with, "" without CUDA
  std::string cudnn_version;
  std::string nccl_version;
  std::string gpu_driver_version;    // NVML; "" without a driver
  std::string cuda_driver_version;   // highest CUDA the driver supports
  std::string compiler;              // HWTRAIN_COMPILER
  std::string hwtrain_version;
};

struct HardwareProfile {
  std::string source = "detected";  // "detected", "preset:<name>", "file:<path>"
  CpuInfo cpu;
  MemoryInfo memory;
  MathLibInfo math;
  EnvInfo env;
  std::vector<GpuInfo> gpus;        // all GPUs of the job (num_nodes x per node)
  int num_nodes = 1;
  std::string inter_node_link;      // "InfiniBand 400 Gb/s" for presets; "" = single node
  SoftwareInfo software;
};

struct DetectOptions {
  bool run_gemm_benchmark = true;  // about 0.7 s on 2 cores; off for tests and quick planning
  double gemm_budget_s = 0.15;     // per dtype; the total stays well under 1 s
  // A probe of this machine at most this old is read from the cache (hw/gemm_probe_cache.h)
  // instead of measured again; 0 always measures (doctor).
  double gemm_cache_max_age_s = 3600;
  // How long to wait for another process measuring the same probe (its lock) before measuring
  // without it: a holder stopped with Ctrl-Z must not stall every later start.
  double gemm_lock_wait_s = 30;
};

// Detects this process's hardware and environment. Never throws for missing devices or files.
HardwareProfile detect_hardware(const DetectOptions& options = {});

nlohmann::json to_json(const HardwareProfile& profile);

// Reads what to_json wrote. Strict: a missing key, a wrong type or an unknown key throws
// HardwareError naming the key path ("cpu.num_physical_cores"). `what` names the input in
// messages (a file path). A document {"preset": NAME, "num_gpus": N} reads as that preset.
HardwareProfile hardware_from_json(const nlohmann::json& j, const std::string& what = "hardware");

// Readable multi-line description (the field's get_hardware_summary()).
std::string hardware_summary(const HardwareProfile& profile);

}  // namespace hwt
