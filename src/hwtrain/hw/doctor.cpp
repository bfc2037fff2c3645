// diagnose(), GPU rules, formatting and run_doctor() (CPU rules in doctor_cpu.cpp).
#include "hwtrain/hw/doctor.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "hwtrain/core/strings.h"
#include "hwtrain/hw/doctor_rules.h"

namespace hwt {
namespace doctor {

using S = Finding::Severity;

// Another process holding more than half a GPU leaves too little for a useful batch.
constexpr double kLowGpuFreeFraction = 0.5;

bool has_usable_gpu(const HardwareProfile& p) {
  return std::any_of(p.gpus.begin(), p.gpus.end(),
                     [](const GpuInfo& g) { return g.usable_by_torch; });
}

void check_gpus(const HardwareProfile& p, Findings* out) {
  const SoftwareInfo& sw = p.software;
  int unusable = static_cast<int>(std::count_if(
      p.gpus.begin(), p.gpus.end(), [](const GpuInfo& g) { return !g.usable_by_torch; }));
  if (unusable > 0 && !sw.torch_cuda) {
    out->push_back({"gpu.torch_without_cuda", S::Critical,
                    fmt("%d GPU(s) present (", unusable) + p.gpus.front().name +
                        ") but this LibTorch was built without CUDA: training would run on the CPU",
                    "rebuild hwtrain on a CUDA-enabled LibTorch: the PyPI torch wheel for Linux "
                    "(scripts/install-deps.sh) or a cu12x/cu13x LibTorch archive"});
  } else if (unusable > 0) {
    out->push_back(
        {"gpu.not_usable", S::Warning,
         fmt("%d GPU(s) seen by the driver are not usable by LibTorch (built for CUDA ", unusable) +
             (sw.cuda_build_version.empty() ? "?" : sw.cuda_build_version) +
             ", driver supports CUDA " +
             (sw.cuda_driver_version.empty() ? "?" : sw.cuda_driver_version) + ")",
         "update the NVIDIA driver to one that supports CUDA " + sw.cuda_build_version +
             " (nvidia-smi shows the supported version), and check CUDA_VISIBLE_DEVICES"});
  }
  if (sw.torch_cuda && p.gpus.empty()) {
    out->push_back({"gpu.cuda_build_no_gpu", S::Info,
                    "LibTorch is built with CUDA " + sw.cuda_build_version +
                        " but no GPU or NVIDIA driver was found: training runs on the CPU",
                    "nothing to fix on a CPU machine; on a GPU machine install the NVIDIA driver "
                    "(nvidia-smi must list the GPUs)"});
  }
  for (const GpuInfo& g : p.gpus) {
    if (!g.usable_by_torch) continue;
    if (!g.bf16) {
      out->push_back({"gpu.no_bf16", S::Info,
                      fmt("GPU %d (", g.index) + g.name +
                          fmt(", compute capability %d.%d) has no bf16 tensor cores: fp16 with "
                              "dynamic loss scaling will be used",
                              g.cc_major, g.cc_minor),
                      "nothing to fix; bf16 needs compute capability 8.0+ (A100, L4, H100, RTX "
                      "30xx/40xx). Set optimization.mixed_precision_dtype=fp32 if fp16 diverges"});
    }
    if (g.free_memory_bytes > 0 && g.total_memory_bytes > 0 &&
        g.free_memory_bytes < kLowGpuFreeFraction * g.total_memory_bytes) {
      out->push_back({"gpu.low_free_memory", S::Warning,
                      fmt("GPU %d has only ", g.index) +
                          format_bytes(static_cast<double>(g.free_memory_bytes)) + " of " +
                          format_bytes(static_cast<double>(g.total_memory_bytes)) +
                          " free: another process holds the rest",
                      "stop the other processes on the GPU (nvidia-smi lists them), or pick a "
                      "free GPU with CUDA_VISIBLE_DEVICES"});
    }
  }
}

}  // namespace doctor

std::string to_string(Finding::Severity s) {
  switch (s) {
    case Finding::Severity::Info: return "info";
    case Finding::Severity::Warning: return "warning";
    case Finding::Severity::Critical: return "critical";
  }
  return "info";
}

std::vector<Finding> diagnose(const HardwareProfile& profile) {
  std::vector<Finding> findings;
  doctor::check_gpus(profile, &findings);
  doctor::check_blas_and_gemm(profile, &findings);
  doctor::check_threads(profile, &findings);
  doctor::check_allocator_and_memory(profile, &findings);
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
  return findings;
}

std::string format_findings(const std::vector<Finding>& findings) {
  if (findings.empty()) return "No findings: nothing on this machine is known to slow training.\n";
  std::ostringstream s;
  s << "Findings (" << findings.size() << "):\n";
  for (const Finding& f : findings) {
    s << "  [" << to_string(f.severity) << "] " << f.id << ": " << f.message << "\n";
    s << "      fix: " << f.fix << "\n";
  }
  return s.str();
}

nlohmann::json findings_to_json(const std::vector<Finding>& findings) {
  nlohmann::json a = nlohmann::json::array();
  for (const Finding& f : findings)
    a.push_back({{"id", f.id}, {"severity", to_string(f.severity)}, {"message", f.message},
                 {"fix", f.fix}});
  return a;
}

int run_doctor(bool json, std::ostream& out) {
  DetectOptions fresh;
  fresh.gemm_cache_max_age_s = 0;  // the doctor measures (and refreshes the cache)
  HardwareProfile profile = detect_hardware(fresh);
  if (json) {
    out << to_json(profile).dump(2) << "\n";
    return 0;
  }
  out << hardware_summary(profile) << "\n" << format_findings(diagnose(profile));
  return 0;
}

}  // namespace hwt
