// `hwtrain doctor`: findings about a HardwareProfile that cost speed or will fail a run, each with
// the fix. diagnose() is a pure function of the profile, so every condition is testable with a
// synthetic profile; run_doctor() detects this machine and prints. The CLI command lives in cli/.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "hwtrain/hw/hardware_profile.h"

namespace hwt {

struct Finding {
  enum class Severity { Info, Warning, Critical };
  std::string id;  // stable, dotted: "blas.mkl_generic_kernels", "threads.oversubscribed"
  Severity severity = Severity::Info;
  std::string message;  // what is wrong, with the values found
  std::string fix;      // what to do about it
};

std::string to_string(Finding::Severity s);

// Findings, most severe first. Ids: blas.reference, blas.openblas_old_coretype,
// blas.mkl_generic_kernels, gemm.fp32_below_peak, gemm.bf16_not_faster, cpu.no_bf16,
// cpu.cgroup_quota, threads.intra_op_below_cores, threads.omp_env_below_cores,
// threads.oversubscribed, threads.env_invalid, alloc.glibc, alloc.jemalloc_decay, memory.low_available,
// memory.cgroup_limit, gpu.torch_without_cuda, gpu.not_usable, gpu.cuda_build_no_gpu,
// gpu.no_bf16, gpu.low_free_memory.
std::vector<Finding> diagnose(const HardwareProfile& profile);

// "[warning] id: message\n          fix: ...", or a line saying nothing was found.
std::string format_findings(const std::vector<Finding>& findings);

nlohmann::json findings_to_json(const std::vector<Finding>& findings);

// Detects this machine (with the GEMM benchmark) and prints the summary and findings, or with
// `json` the profile alone (the input `--hardware FILE.json` accepts). Returns 0.
int run_doctor(bool json, std::ostream& out);

}  // namespace hwt
