// Doctor findings: each rule is fed its condition in a synthetic profile and must report its id
// with a fix; a healthy profile reports nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "hwtrain/hw/doctor.h"
#include "hwtrain/hw/hardware_preset.h"
#include "hwtrain/hw/peak_flops.h"

namespace hwt {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// A 2-core Zen 4 with AVX512_BF16, MKL on its AVX-512 path, jemalloc without decay, enough
// memory, a CPU-only LibTorch: nothing to report.
HardwareProfile healthy() {
  HardwareProfile p;
  CpuInfo& c = p.cpu;
  c.arch = "x86_64";
  c.vendor = "AuthenticAMD";
  c.model_name = "AMD EPYC 9R14 96-Core Processor";
  c.family = 0x19;
  c.num_physical_cores = c.num_logical_threads = c.num_online_threads = 2;
  c.isa = CpuIsa{true, true, true, true, true, true, true, true, true, false, false};
  c.frequency_mhz = 2600;
  c.frequency_source = "/proc/cpuinfo";
  p.memory.total_bytes = p.memory.effective_total_bytes = 24 * kGiB;
  p.memory.available_bytes = p.memory.effective_available_bytes = 20 * kGiB;
  MathLibInfo& m = p.math;
  m.blas = "mkl";
  m.blas_code_path = "AVX-512 + VNNI/BF16";
  m.onednn_version = "3.10.2";
  m.gemm_measured = true;
  m.gemm_threads = 2;
  m.fp32_gemm_gflops = 120;  // of 166 peak: 72%
  m.bf16_gemm_gflops = 250;
  apply_peak(estimate_peak_flops(c), 2, 2, &m);
  p.env.allocator = Allocator::Jemalloc;
  p.env.jemalloc_dirty_decay_ms = -1;
  p.env.torch_intra_op_threads = 2;
  p.env.torch_inter_op_threads = 1;
  p.software.torch_version = "2.11.0";
  p.software.torch_mkldnn = true;
  p.software.torch_openmp = true;
  return p;
}

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
  for (const Finding& f : fs)
    if (f.id == id) return &f;
  return nullptr;
}

// Asserts `id` is among the findings of `p` with the given severity and a non-empty fix, and
// returns it.
Finding expect_finding(const HardwareProfile& p, const std::string& id, Finding::Severity sev) {
  std::vector<Finding> fs = diagnose(p);
  const Finding* f = find(fs, id);
  EXPECT_NE(f, nullptr) << id << " not found in:\n" << format_findings(fs);
  if (f == nullptr) return {};
  EXPECT_EQ(to_string(f->severity), to_string(sev)) << id;
  EXPECT_FALSE(f->message.empty()) << id;
  EXPECT_FALSE(f->fix.empty()) << id;
  return *f;
}

TEST(Doctor, HealthyProfileHasNoFindings) {
  std::vector<Finding> fs = diagnose(healthy());
  EXPECT_TRUE(fs.empty()) << format_findings(fs);
  EXPECT_NE(format_findings(fs).find("No findings"), std::string::npos);
}

TEST(Doctor, HealthyPeakAssumptionIsZen4) {
  HardwareProfile p = healthy();
  EXPECT_DOUBLE_EQ(p.math.peak_fp32_gflops_per_core, 32 * 2.6);
  EXPECT_DOUBLE_EQ(p.math.peak_bf16_gflops, 2 * 64 * 2.6);
  EXPECT_NE(p.math.peak_assumption.find("Zen 4"), std::string::npos) << p.math.peak_assumption;
}

TEST(Doctor, ReferenceBlas) {
  HardwareProfile p = healthy();
  p.math.blas = "reference";
  p.math.blas_code_path = "";
  p.math.blas_version = "netlib reference BLAS (/usr/lib/x86_64-linux-gnu/blas/libblas.so.3)";
  p.math.fp32_gemm_gflops = 3;
  apply_peak(estimate_peak_flops(p.cpu), 2, 2, &p.math);
  expect_finding(p, "blas.reference", Finding::Severity::Critical);
  // The cause is named, so the generic GEMM finding stays quiet.
  EXPECT_EQ(find(diagnose(p), "gemm.fp32_below_peak"), nullptr);
}

TEST(Doctor, OpenBlasForcedToHaswellOnAvx512) {
  HardwareProfile p = healthy();
  p.math.blas = "openblas";
  p.math.blas_core_type = "Haswell";
  p.env.openblas_coretype = "Haswell";
  Finding f = expect_finding(p, "blas.openblas_old_coretype", Finding::Severity::Warning);
  EXPECT_NE(f.message.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << f.message;
  EXPECT_NE(f.fix.find("unset OPENBLAS_CORETYPE"), std::string::npos) << f.fix;
  EXPECT_NE(f.fix.find("Cooperlake"), std::string::npos) << f.fix;
  // The right core type is not reported.
  p.math.blas_core_type = p.env.openblas_coretype = "SkylakeX";
  EXPECT_EQ(find(diagnose(p), "blas.openblas_old_coretype"), nullptr);
}

TEST(Doctor, MklGenericKernelsOnAmd) {
  HardwareProfile p = healthy();
  p.math.blas_code_path = "generic (SSE2)";
  p.math.fp32_gemm_gflops = 40;
  apply_peak(estimate_peak_flops(p.cpu), 2, 2, &p.math);
  Finding f = expect_finding(p, "blas.mkl_generic_kernels", Finding::Severity::Warning);
  EXPECT_NE(f.message.find("AMD"), std::string::npos) << f.message;
  EXPECT_NE(f.fix.find("mkl_serv_intel_cpu_true"), std::string::npos) << f.fix;
}

TEST(Doctor, GemmFarBelowPeak) {
  HardwareProfile p = healthy();
  p.math.fp32_gemm_gflops = 30;  // 18% of 166
  apply_peak(estimate_peak_flops(p.cpu), 2, 2, &p.math);
  Finding f = expect_finding(p, "gemm.fp32_below_peak", Finding::Severity::Warning);
  EXPECT_NE(f.message.find("18%"), std::string::npos) << f.message;
  // Measured while other processes held the cores: reported, but not blamed on the BLAS.
  p.math.gemm_load_average = 9.5;
  f = expect_finding(p, "gemm.fp32_below_peak", Finding::Severity::Info);
  EXPECT_NE(f.message.find("busy"), std::string::npos) << f.message;
  p.math.gemm_load_average = 0;
  // With a usable GPU the CPU's speed matters less: the same condition is only informative.
  p.gpus = hardware_preset("l4", 1)->gpus;
  p.software.torch_cuda = true;
  expect_finding(p, "gemm.fp32_below_peak", Finding::Severity::Info);
}

TEST(Doctor, Bf16NotFasterThanFp32) {
  HardwareProfile p = healthy();
  p.math.bf16_gemm_gflops = 100;
  expect_finding(p, "gemm.bf16_not_faster", Finding::Severity::Warning);
  p.math.gemm_load_average = 9.5;
  Finding f = expect_finding(p, "gemm.bf16_not_faster", Finding::Severity::Info);
  EXPECT_NE(f.message.find("busy"), std::string::npos) << f.message;
}

TEST(Doctor, CpuWithoutBf16) {
  HardwareProfile p = healthy();
  p.cpu.isa.avx512_bf16 = false;
  p.math.bf16_gemm_gflops = 30;  // emulated: slower, as expected, so no bf16_not_faster
  std::vector<Finding> fs = diagnose(p);
  expect_finding(p, "cpu.no_bf16", Finding::Severity::Info);
  EXPECT_EQ(find(fs, "gemm.bf16_not_faster"), nullptr);
}

TEST(Doctor, IntraOpThreadsBelowCores) {
  HardwareProfile p = healthy();
  p.env.torch_intra_op_threads = 1;
  p.env.omp_num_threads = "1";
  Finding f = expect_finding(p, "threads.intra_op_below_cores", Finding::Severity::Warning);
  EXPECT_NE(f.message.find("OMP_NUM_THREADS=1"), std::string::npos) << f.message;
}

TEST(Doctor, OmpEnvBelowCoresWhileLibTorchUsesAll) {
  HardwareProfile p = healthy();
  p.env.omp_num_threads = "1";
  expect_finding(p, "threads.omp_env_below_cores", Finding::Severity::Info);
}

TEST(Doctor, OversubscribedByEnvironment) {
  HardwareProfile p = healthy();
  p.env.omp_num_threads = "2";
  p.env.mkl_num_threads = "2";  // 2 x 2 on 2 threads
  Finding f = expect_finding(p, "threads.oversubscribed", Finding::Severity::Warning);
  EXPECT_NE(f.message.find("OMP_NUM_THREADS x MKL_NUM_THREADS = 4"), std::string::npos) << f.message;
  p = healthy();
  p.env.torch_intra_op_threads = 8;
  expect_finding(p, "threads.oversubscribed", Finding::Severity::Warning);
}

// A value the runtimes cannot read is ignored by them (libgomp prints "Invalid value"): said, naming
// the variable; OpenMP's nested list form is valid.
TEST(Doctor, ThreadVariablesTheRuntimesCannotRead) {
  for (const char* bad : {"abc", "0", "-3", "4x", "4,", ""}) {
    HardwareProfile p = healthy();
    p.env.omp_num_threads = bad;
    const bool reported = (find(diagnose(p), "threads.env_invalid") != nullptr);
    EXPECT_EQ(reported, std::string(bad) != "") << "OMP_NUM_THREADS='" << bad << "'";
  }
  HardwareProfile p = healthy();
  p.env.mkl_num_threads = "two";
  Finding f = expect_finding(p, "threads.env_invalid", Finding::Severity::Warning);
  EXPECT_NE(f.message.find("MKL_NUM_THREADS='two'"), std::string::npos) << f.message;
  // Set to nothing is not unset: detect_env says so ("''"), and libgomp rejects it.
  p = healthy();
  p.env.omp_num_threads = "''";
  f = expect_finding(p, "threads.env_invalid", Finding::Severity::Warning);
  EXPECT_NE(f.message.find("OMP_NUM_THREADS='' is not"), std::string::npos) << f.message;
  p = healthy();
  p.env.omp_num_threads = " 2 ,1 ";  // blanks around the numbers: libgomp reads them
  EXPECT_FALSE((find(diagnose(p), "threads.env_invalid") != nullptr));
}

TEST(Doctor, OversubscribedByOpenBlasPool) {
  HardwareProfile p = healthy();
  p.math.blas = "openblas";
  p.math.blas_core_type = "Cooperlake";
  p.math.blas_num_threads = 2;
  Finding f = expect_finding(p, "threads.oversubscribed", Finding::Severity::Warning);
  EXPECT_NE(f.fix.find("libopenblas0-openmp"), std::string::npos) << f.fix;
}

TEST(Doctor, GlibcAllocator) {
  HardwareProfile p = healthy();
  p.env.allocator = Allocator::Glibc;
  Finding f = expect_finding(p, "alloc.glibc", Finding::Severity::Warning);
  EXPECT_NE(f.fix.find("jemalloc"), std::string::npos);
}

TEST(Doctor, JemallocWithDecay) {
  HardwareProfile p = healthy();
  p.env.jemalloc_dirty_decay_ms = 10000;
  expect_finding(p, "alloc.jemalloc_decay", Finding::Severity::Info);
}

TEST(Doctor, LittleFreeMemory) {
  HardwareProfile p = healthy();
  p.memory.available_bytes = p.memory.effective_available_bytes = kGiB;  // < 2 GiB
  expect_finding(p, "memory.low_available", Finding::Severity::Warning);
  p = healthy();
  p.memory.total_bytes = p.memory.effective_total_bytes = 256 * kGiB;
  p.memory.available_bytes = p.memory.effective_available_bytes = 16 * kGiB;  // 6%
  expect_finding(p, "memory.low_available", Finding::Severity::Warning);
}

TEST(Doctor, CgroupLimits) {
  HardwareProfile p = healthy();
  p.memory.cgroup_limit_bytes = p.memory.effective_total_bytes = 8 * kGiB;
  p.memory.effective_available_bytes = 6 * kGiB;
  expect_finding(p, "memory.cgroup_limit", Finding::Severity::Info);
  p = healthy();
  p.cpu.num_online_threads = 16;
  p.cpu.cgroup_cpu_quota = 2;
  expect_finding(p, "cpu.cgroup_quota", Finding::Severity::Info);
}

TEST(Doctor, GpuPresentButLibTorchWithoutCuda) {
  HardwareProfile p = healthy();
  p.gpus = hardware_preset("a100-80gb", 2)->gpus;
  for (GpuInfo& g : p.gpus) g.usable_by_torch = false;
  p.software.torch_cuda = false;
  expect_finding(p, "gpu.torch_without_cuda", Finding::Severity::Critical);
}

TEST(Doctor, GpuNotUsableDespiteCudaBuild) {
  HardwareProfile p = healthy();
  p.gpus = hardware_preset("l4", 1)->gpus;
  p.gpus[0].usable_by_torch = false;
  p.software.torch_cuda = true;
  p.software.cuda_build_version = "13.0";
  p.software.cuda_driver_version = "12.2";
  Finding f = expect_finding(p, "gpu.not_usable", Finding::Severity::Warning);
  EXPECT_NE(f.message.find("12.2"), std::string::npos) << f.message;
}

TEST(Doctor, CudaBuildWithoutGpu) {
  HardwareProfile p = healthy();
  p.software.torch_cuda = true;
  p.software.cuda_build_version = "13.0";
  expect_finding(p, "gpu.cuda_build_no_gpu", Finding::Severity::Info);
}

TEST(Doctor, GpuWithoutBf16) {
  HardwareProfile p = healthy();
  p.gpus = hardware_preset("v100-32gb", 1)->gpus;
  p.software.torch_cuda = true;
  Finding f = expect_finding(p, "gpu.no_bf16", Finding::Severity::Info);
  EXPECT_NE(f.message.find("fp16"), std::string::npos);
}

TEST(Doctor, GpuMemoryHeldByAnotherProcess) {
  HardwareProfile p = healthy();
  p.gpus = hardware_preset("h100-80gb", 1)->gpus;
  p.gpus[0].free_memory_bytes = 10 * kGiB;
  p.software.torch_cuda = true;
  expect_finding(p, "gpu.low_free_memory", Finding::Severity::Warning);
}

TEST(Doctor, HealthyGpuMachineHasNoWarnings) {
  HardwareProfile p = healthy();
  p.gpus = hardware_preset("h100-80gb", 8)->gpus;
  p.software.torch_cuda = true;
  for (const Finding& f : diagnose(p))
    EXPECT_EQ(f.severity, Finding::Severity::Info) << f.id << ": " << f.message;
}

TEST(Doctor, MostSevereFirstAndJson) {
  HardwareProfile p = healthy();
  p.env.allocator = Allocator::Glibc;
  p.math.blas = "reference";
  p.env.omp_num_threads = "1";
  std::vector<Finding> fs = diagnose(p);
  ASSERT_GE(fs.size(), 3u);
  EXPECT_TRUE(std::is_sorted(fs.begin(), fs.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  }));
  EXPECT_EQ(fs.front().id, "blas.reference");
  nlohmann::json j = findings_to_json(fs);
  ASSERT_EQ(j.size(), fs.size());
  EXPECT_EQ(j[0]["severity"], "critical");
  std::string text = format_findings(fs);
  EXPECT_NE(text.find("[critical] blas.reference"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: "), std::string::npos) << text;
}

TEST(Doctor, RunDoctorOnThisMachine) {
  std::ostringstream text;
  EXPECT_EQ(run_doctor(false, text), 0);
  std::cout << text.str();  // what `hwtrain doctor` says here, for the test log
  EXPECT_NE(text.str().find("Hardware (detected)"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("GEMM      fp32"), std::string::npos) << text.str();
  // --json prints exactly what --hardware FILE.json reads back.
  std::ostringstream js;
  EXPECT_EQ(run_doctor(true, js), 0);
  HardwareProfile back = hardware_from_json(nlohmann::json::parse(js.str()));
  EXPECT_TRUE(back.math.gemm_measured);
  EXPECT_GT(back.math.fp32_gemm_gflops, 0);
}

}  // namespace
}  // namespace hwt
