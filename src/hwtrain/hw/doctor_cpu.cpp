// Doctor rules for the CPU side: BLAS kernels, GEMM speed against the ISA, bf16, threads,
// allocator and memory. Thresholds sit next to their reason.
#include <algorithm>
#include <utility>

#include "hwtrain/core/strings.h"
#include "hwtrain/hw/doctor_rules.h"
#include "hwtrain/hw/env_info.h"

namespace hwt::doctor {
namespace {

using S = Finding::Severity;

// A well-tuned BLAS reaches 60-90% of the FMA peak on square GEMMs of 512-1024; below 35% the
// kernels are the wrong ones for this CPU (reference code, an older core type, a vendor check).
constexpr double kLowGemmEfficiency = 0.35;
// Below this free memory a 124M model's training step (optimizer states + activations) fails.
constexpr double kLowMemoryBytes = 2.0 * 1024 * 1024 * 1024;
constexpr double kLowMemoryFraction = 0.10;

// OpenBLAS kernel generations: 3 AVX-512, 2 AVX2, 1 AVX, 0 older; -1 unknown name.
int openblas_core_rank(std::string core) {
  std::transform(core.begin(), core.end(), core.begin(), ::tolower);
  for (const char* c : {"skylakex", "cooperlake", "sapphirerapids"})
    if (core == c) return 3;
  for (const char* c : {"haswell", "zen", "excavator", "alderlake"})
    if (core == c) return 2;
  for (const char* c : {"sandybridge", "bulldozer", "piledriver", "steamroller"})
    if (core == c) return 1;
  for (const char* c : {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom",
                        "barcelona", "opteron", "katmai", "coppermine", "northwood", "banias"})
    if (core == c) return 0;
  return -1;
}

int cpu_rank(const CpuIsa& isa) {
  if (isa.avx512f) return 3;
  if (isa.avx2 && isa.fma) return 2;
  if (isa.f16c) return 1;
  return 0;
}

std::string best_openblas_core(const CpuIsa& isa) {
  if (isa.amx_bf16) return "SapphireRapids";
  if (isa.avx512_bf16) return "Cooperlake";
  if (isa.avx512f) return "SkylakeX";
  return "Haswell";
}

S cpu_speed_severity(const HardwareProfile& p) {
  return has_usable_gpu(p) ? S::Info : S::Warning;
}

}  // namespace

namespace {

// Which BLAS LibTorch's fp32 matmul runs on, and whether it runs its best kernels for this CPU.
void check_blas_library(const HardwareProfile& p, Findings* out) {
  const MathLibInfo& m = p.math;
  const CpuIsa& isa = p.cpu.isa;
  if (m.blas == "reference") {
    out->push_back({"blas.reference", has_usable_gpu(p) ? S::Warning : S::Critical,
                    "fp32 matmul runs on the reference BLAS (" + m.blas_version +
                        "): no SIMD blocking, ~25x slower than an optimized BLAS",
                    "select an optimized BLAS: `apt install libopenblas0-openmp` then "
                    "`update-alternatives --config libblas.so.3-x86_64-linux-gnu`, or build "
                    "hwtrain on the PyPI torch wheel (MKL + oneDNN), as scripts/install-deps.sh does"});
  }
  if (m.blas == "openblas") {
    std::string core = !m.blas_core_type.empty() ? m.blas_core_type : p.env.openblas_coretype;
    int rank = openblas_core_rank(core);
    if (rank >= 0 && rank < cpu_rank(isa)) {
      bool forced = !p.env.openblas_coretype.empty();
      out->push_back(
          {"blas.openblas_old_coretype", cpu_speed_severity(p),
           "OpenBLAS runs its " + core + " kernels on a CPU that supports " +
               best_openblas_core(isa) + " kernels" +
               (forced ? " (OPENBLAS_CORETYPE=" + p.env.openblas_coretype + " forces them)" : "") +
               "; fp32 GEMM is ~1.8x slower than it could be",
           forced ? "unset OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) so OpenBLAS detects the CPU, "
                    "or set OPENBLAS_CORETYPE=" + best_openblas_core(isa)
                  : "install an OpenBLAS built with DYNAMIC_ARCH that knows this CPU (Debian's "
                    "libopenblas0 >= 0.3.21), or set OPENBLAS_CORETYPE=" + best_openblas_core(isa)});
    }
  }
  // SSE2 up to SSE4.2 ("generic (SSE2)", "SSE3", "SSSE3", "SSE4.2"): no AVX kernels.
  bool generic = m.blas_code_path.rfind("generic", 0) == 0 || m.blas_code_path.rfind("SS", 0) == 0;
  if (m.blas == "mkl" && generic && isa.avx2) {
    bool amd = p.cpu.vendor == "AuthenticAMD";
    out->push_back(
        {"blas.mkl_generic_kernels", cpu_speed_severity(p),
         "MKL dispatches its " + m.blas_code_path + " kernels" +
             (amd ? " on this AMD CPU (MKL chooses AVX2/AVX-512 kernels only on Intel CPUs)"
                  : "") +
             (m.gemm_measured ? fmt(", so fp32 matmul reaches %.0f GFLOP/s where the ISA "
                                    "allows %.0f",
                                    m.fp32_gemm_gflops, m.peak_fp32_gflops)
                              : std::string(", several times slower than its AVX-512 kernels")),
         "train in bf16 (the planner chooses it on AVX512_BF16 CPUs: oneDNN's kernels are not "
         "affected), or let MKL take its AVX-512 path: build a shim with `echo 'int "
         "mkl_serv_intel_cpu_true(){return 1;}' | gcc -shared -fPIC -x c - -o libmklfix.so` and "
         "run with LD_PRELOAD=$PWD/libmklfix.so (check with MKL_VERBOSE=1)"});
  }
}

// What the GEMM probe measured against what the ISA allows; `explained`: a BLAS finding already
// says why fp32 is slow.
void check_gemm_speed(const HardwareProfile& p, bool explained, Findings* out) {
  const MathLibInfo& m = p.math;
  const CpuIsa& isa = p.cpu.isa;
  // Other processes on the cores slow every kernel alike: say so rather than blame the BLAS.
  bool busy = m.gemm_load_average > std::max(1, p.cpu.num_logical_threads);
  if (!explained && m.gemm_measured && m.fp32_efficiency > 0 &&
      m.fp32_efficiency < kLowGemmEfficiency) {
    out->push_back(
        {"gemm.fp32_below_peak", busy ? S::Info : cpu_speed_severity(p),
         fmt("fp32 GEMM measured %.0f GFLOP/s on %d threads: %.0f%% of the %.0f GFLOP/s the ISA "
             "allows (expected > %.0f%%)",
             m.fp32_gemm_gflops, m.gemm_threads, 100 * m.fp32_efficiency, m.peak_fp32_gflops,
             100 * kLowGemmEfficiency) +
             (busy ? fmt("; the machine was busy (load average %.1f on %d hardware threads)",
                         m.gemm_load_average, p.cpu.num_logical_threads)
                   : std::string()),
         std::string(busy ? "run `hwtrain doctor` again when the machine is idle; if it stays "
                            "low: "
                          : "") +
             "check which BLAS LibTorch uses (`hwtrain doctor --json`: math.blas, "
         "math.blas_code_path; MKL_VERBOSE=1 / OPENBLAS_VERBOSE=2 print the kernels), that no "
         "other process competes for the cores (top), and that the thread findings below are "
         "resolved"});
  }
  bool native_bf16 = isa.avx512_bf16 || isa.amx_bf16;
  if (native_bf16 && m.gemm_measured && m.bf16_gemm_gflops <= m.fp32_gemm_gflops) {
    out->push_back(
        {"gemm.bf16_not_faster", busy ? S::Info : cpu_speed_severity(p),
         fmt("bf16 GEMM (%.0f GFLOP/s) is not faster than fp32 (%.0f GFLOP/s) although the CPU "
             "has %s; the planner will train in fp32",
             m.bf16_gemm_gflops, m.fp32_gemm_gflops, isa.amx_bf16 ? "AMX-BF16" : "AVX512_BF16") +
             (busy ? fmt("; the machine was busy (load average %.1f)", m.gemm_load_average)
                   : std::string()),
         std::string(busy ? "run `hwtrain doctor` again when the machine is idle; if it stays: "
                          : "") +
             (p.software.torch_mkldnn ? "" : "LibTorch lacks oneDNN (USE_MKLDNN=OFF): use "
                                             "the PyPI torch wheel; ") +
             "check that ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA is unset and ATen's CPU "
             "capability (ATEN_CPU_CAPABILITY) is not capped below AVX512"});
  }
  if (!native_bf16 && !has_usable_gpu(p) && p.cpu.arch == "x86_64") {
    out->push_back({"cpu.no_bf16", S::Info,
                    "this CPU has no native bf16 (AVX512_BF16 or AMX-BF16): training uses fp32, "
                    "since emulated bf16 is slower (pytorch#86270)",
                    "nothing to fix; for bf16 speed use a CPU with AVX512_BF16 (AMD Zen 4+, Intel "
                    "Cooper Lake) or AMX (Sapphire Rapids+), or a GPU"});
  }
}

void check_thread_env_values(const EnvInfo& e, Findings* out) {
  std::vector<std::string> bad;
  for (const auto& [name, value] : {std::pair<const char*, const std::string&>{"OMP_NUM_THREADS", e.omp_num_threads},
                                    {"MKL_NUM_THREADS", e.mkl_num_threads},
                                    {"OPENBLAS_NUM_THREADS", e.openblas_num_threads}}) {
    if (value == "''") bad.push_back(std::string(name) + "=''");  // set to nothing
    else if (!value.empty() && !valid_thread_count(value)) bad.push_back(std::string(name) + "='" + value + "'");
  }
  if (bad.empty()) return;
  out->push_back({"threads.env_invalid", S::Warning,
                  join(bad, ", ") + (bad.size() == 1 ? " is" : " are") +
                      " not a positive whole number: the runtime ignores it (libgomp says \"Invalid value\")",
                  "unset it (hwtrain sizes LibTorch's pool to the usable cores) or set a whole number >= 1"});
}

}  // namespace

void check_blas_and_gemm(const HardwareProfile& p, Findings* out) {
  const size_t before = out->size();
  check_blas_library(p, out);
  check_gemm_speed(p, out->size() > before, out);
}

void check_threads(const HardwareProfile& p, Findings* out) {
  const EnvInfo& e = p.env;
  int cores = std::max(1, p.cpu.num_physical_cores);
  int threads = std::max(1, p.cpu.num_logical_threads);
  int omp = parse_thread_count(e.omp_num_threads);
  int mkl = parse_thread_count(e.mkl_num_threads);
  int openblas = parse_thread_count(e.openblas_num_threads);
  check_thread_env_values(e, out);
  if (e.torch_intra_op_threads > 0 && e.torch_intra_op_threads < cores) {
    out->push_back(
        {"threads.intra_op_below_cores", cpu_speed_severity(p),
         fmt("LibTorch runs %d intra-op thread(s) on %d usable cores", e.torch_intra_op_threads,
             cores) + (omp > 0 && omp < cores ? " (OMP_NUM_THREADS=" + e.omp_num_threads + ")" : ""),
         fmt("unset OMP_NUM_THREADS (hwtrain sets intra-op threads to the usable cores) or set it "
             "to %d; remove any explicit thread override (at::set_num_threads)",
             cores)});
  } else if (omp > 0 && omp < cores) {
    out->push_back({"threads.omp_env_below_cores", S::Info,
                    fmt("OMP_NUM_THREADS=%d is below the %d usable cores (LibTorch overrides it, "
                        "other OpenMP code in this process does not)",
                        omp, cores),
                    fmt("unset OMP_NUM_THREADS or set it to %d", cores)});
  }
  std::vector<std::string> why;
  if (e.torch_intra_op_threads > threads)
    why.push_back(fmt("%d LibTorch intra-op threads", e.torch_intra_op_threads));
  if (omp > threads) why.push_back("OMP_NUM_THREADS=" + e.omp_num_threads);
  if (mkl > threads) why.push_back("MKL_NUM_THREADS=" + e.mkl_num_threads);
  if (openblas > threads) why.push_back("OPENBLAS_NUM_THREADS=" + e.openblas_num_threads);
  if (omp > 0 && mkl > 1 && omp * mkl > threads && omp <= threads && mkl <= threads)
    why.push_back(fmt("OMP_NUM_THREADS x MKL_NUM_THREADS = %d", omp * mkl));
  if (omp > 0 && openblas > 1 && omp * openblas > threads && omp <= threads && openblas <= threads)
    why.push_back(fmt("OMP_NUM_THREADS x OPENBLAS_NUM_THREADS = %d", omp * openblas));
  // OpenBLAS built with pthreads keeps its own pool beside LibTorch's OpenMP pool: while one
  // runs a GEMM the other's threads spin, and the two fight for the cores.
  bool pools = p.math.blas == "openblas" && p.math.blas_num_threads > 1 &&
               e.torch_intra_op_threads > 1 &&
               p.math.blas_num_threads + e.torch_intra_op_threads > threads;
  if (pools)
    why.push_back(fmt("OpenBLAS's own pool of %d threads beside %d LibTorch threads",
                      p.math.blas_num_threads, e.torch_intra_op_threads));
  if (!why.empty()) {
    out->push_back(
        {"threads.oversubscribed", cpu_speed_severity(p),
         "more threads than the " + std::to_string(threads) + " usable hardware threads: " +
             join(why, "; "),
         fmt("keep each pool at or below %d threads and their product at or below %d: unset "
             "OMP_NUM_THREADS/MKL_NUM_THREADS/OPENBLAS_NUM_THREADS (hwtrain sizes LibTorch's pool)",
             cores, threads) +
             std::string(pools ? "; use the OpenMP build of OpenBLAS (libopenblas0-openmp), "
                                 "which shares LibTorch's pool, or set OMP_WAIT_POLICY=PASSIVE"
                               : "")});
  }
}

void check_allocator_and_memory(const HardwareProfile& p, Findings* out) {
  const EnvInfo& e = p.env;
  if (e.allocator == Allocator::Glibc) {
    out->push_back(
        {"alloc.glibc", S::Warning,
         "glibc malloc returns freed activation buffers to the OS and page-faults them back "
         "every step (jemalloc without decay measured up to 1.85x faster on CPU training)",
         "run the hwtrain binary (it links jemalloc; build with HWTRAIN_USE_JEMALLOC=ON), or for "
         "another program: `apt install libjemalloc2` and LD_PRELOAD=libjemalloc.so.2 "
         "MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1"});
  }
  if (e.allocator == Allocator::Jemalloc && e.jemalloc_dirty_decay_ms >= 0) {
    out->push_back(
        {"alloc.jemalloc_decay", S::Info,
         fmt("jemalloc returns dirty pages to the OS after %lld ms, so buffers freed between "
             "steps are faulted in again",
             static_cast<long long>(e.jemalloc_dirty_decay_ms)),
         "set MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 (memory then stays at the peak of a "
         "step, which training reaches every step anyway)"});
  }
  const MemoryInfo& m = p.memory;
  double avail = static_cast<double>(m.effective_available_bytes);
  double total = static_cast<double>(m.effective_total_bytes > 0 ? m.effective_total_bytes
                                                                 : m.total_bytes);
  if (total > 0 && (avail < kLowMemoryBytes || avail < kLowMemoryFraction * total)) {
    out->push_back({"memory.low_available", S::Warning,
                    "only " + format_bytes(avail) + " of " + format_bytes(total) +
                        " memory is available to this process",
                    "stop other memory-hungry processes; the planner sizes the micro-batch to "
                    "the available memory, so expect small batches or an out-of-memory error"});
  }
  if (m.cgroup_limit_bytes > 0 && m.cgroup_limit_bytes < m.total_bytes) {
    out->push_back({"memory.cgroup_limit", S::Info,
                    "a cgroup limits this process to " +
                        format_bytes(static_cast<double>(m.cgroup_limit_bytes)) + " of the " +
                        format_bytes(static_cast<double>(m.total_bytes)) + " in the machine",
                    "nothing to fix: the planner plans for the limit; raise it (docker run "
                    "--memory, systemd MemoryMax=) to train larger batches"});
  }
  if (p.cpu.cgroup_cpu_quota > 0 && p.cpu.cgroup_cpu_quota < p.cpu.num_online_threads) {
    out->push_back({"cpu.cgroup_quota", S::Info,
                    fmt("a cgroup CPU quota allows %.2f of the %d online CPUs",
                        p.cpu.cgroup_cpu_quota, p.cpu.num_online_threads),
                    "nothing to fix: threads are sized to the quota; raise it (docker run --cpus, "
                    "systemd CPUQuota=) to train faster"});
  }
}

}  // namespace hwt::doctor
