// The GEMM probe cache (see gemm_probe_cache.h).
#include "hwtrain/hw/gemm_probe_cache.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "hwtrain/core/files.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/hw/sysfs.h"

namespace hwt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxCacheBytes = 64 << 10;

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// A finite number in [lo, hi] at j[key], else NaN.
double number_in(const json& j, const char* key, double lo, double hi) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return NAN;
  const double v = it->get<double>();
  return std::isfinite(v) && v >= lo && v <= hi ? v : NAN;
}

// The file's entries, or an empty object when it is missing, too large or not what write wrote.
json read_entries(const fs::path& file) {
  try {
    const json j = parse_json_bounded(read_regular_file(file, kMaxCacheBytes));
    if (j.is_object() && j.value("format_version", 0) == 1 && j.contains("entries") && j["entries"].is_object() &&
        j["entries"].size() <= kMaxGemmProbeEntries) {
      return j["entries"];
    }
  } catch (const std::exception&) {
  }
  return json::object();
}

}  // namespace

fs::path gemm_probe_cache_file() {
  if (const char* dir = env_or_null("HWTRAIN_CACHE")) return fs::path(dir) / "gemm-probe.json";
  if (const char* home = env_or_null("HOME")) return fs::path(home) / ".cache" / "hwtrain" / "gemm-probe.json";
  return {};
}

std::string gemm_probe_key(const HardwareProfile& p, int threads) {
  const std::string boot = sysfs::read_text("/proc/sys/kernel/random/boot_id");
  return p.cpu.model_name + " | " + std::to_string(p.cpu.num_physical_cores) + " cores, " +
         std::to_string(p.cpu.num_online_threads) + " online, quota " + std::to_string(p.cpu.cgroup_cpu_quota) +
         " | " + std::to_string(threads) + " threads | LibTorch " + p.software.torch_version + ", " + p.math.blas +
         " " + p.math.blas_version + ", " + p.math.cpu_capability + ", oneDNN " + p.math.onednn_version +
         " | boot " + boot.substr(0, boot.find_first_of(" \n"));
}

std::optional<CachedGemmProbe> read_gemm_probe(const fs::path& file, const std::string& key, double now,
                                               double max_age_s) {
  if (file.empty() || max_age_s <= 0) return std::nullopt;
  const json entries = read_entries(file);
  const auto it = entries.find(key);
  if (it == entries.end() || !it->is_object()) return std::nullopt;
  const json& e = *it;
  CachedGemmProbe c;
  const double at = number_in(e, "measured_at", 0, now), n = number_in(e, "n", 1, 1 << 16),
               threads = number_in(e, "threads", 1, 1 << 16);
  c.rates.fp32_gflops = number_in(e, "fp32_gflops", 1e-3, 1e9);
  c.rates.bf16_gflops = number_in(e, "bf16_gflops", 0, 1e9);
  c.load_average = number_in(e, "load_average", 0, 1e6);
  if (std::isnan(at) || std::isnan(n) || std::isnan(threads) || std::isnan(c.rates.fp32_gflops) ||
      std::isnan(c.rates.bf16_gflops) || std::isnan(c.load_average) || now - at > max_age_s) {
    return std::nullopt;
  }
  c.rates.n = static_cast<int>(n);
  c.rates.threads = static_cast<int>(threads);
  c.age_seconds = now - at;
  return c;
}

void write_gemm_probe(const fs::path& file, const std::string& key, const CachedGemmProbe& probe, double now) {
  if (file.empty()) return;
  try {
    json entries = read_entries(file);
    entries[key] = {{"measured_at", now},
                    {"n", probe.rates.n},
                    {"threads", probe.rates.threads},
                    {"fp32_gflops", probe.rates.fp32_gflops},
                    {"bf16_gflops", probe.rates.bf16_gflops},
                    {"load_average", probe.load_average}};
    while (entries.size() > kMaxGemmProbeEntries) {  // the oldest goes
      auto oldest = entries.begin();
      for (auto e = entries.begin(); e != entries.end(); ++e) {
        if (e->value("measured_at", 0.0) < oldest->value("measured_at", 0.0)) oldest = e;
      }
      entries.erase(oldest);
    }
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    write_file_atomic(file, json({{"format_version", 1}, {"entries", entries}}).dump(1));
  } catch (const std::exception&) {
    // A cache that cannot be written only costs the next run its probe.
  }
}

}  // namespace hwt
