// HardwareProfile <-> JSON. One field list per struct (fields()) drives both the writer and the
// strict reader, so the two cannot drift apart.
#include <limits>
#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/hw/hardware_preset.h"
#include "hwtrain/hw/hardware_profile.h"

namespace hwt {
namespace {

using nlohmann::json;
constexpr int kFormatVersion = 1;

template <typename V>
void fields(CpuIsa& x, V& v) {
  v("sse4_2", x.sse4_2), v("avx2", x.avx2), v("fma", x.fma), v("f16c", x.f16c);
  v("avx512f", x.avx512f), v("avx512bw", x.avx512bw), v("avx512vl", x.avx512vl);
  v("avx512_vnni", x.avx512_vnni), v("avx512_bf16", x.avx512_bf16);
  v("amx_tile", x.amx_tile), v("amx_bf16", x.amx_bf16);
}
template <typename V>
void fields(CpuInfo& x, V& v) {
  v("arch", x.arch), v("vendor", x.vendor), v("model_name", x.model_name);
  v("family", x.family), v("model", x.model);
  v("num_physical_cores", x.num_physical_cores), v("num_logical_threads", x.num_logical_threads);
  v("num_online_threads", x.num_online_threads), v("cgroup_cpu_quota", x.cgroup_cpu_quota);
  v("isa", x.isa), v("os_avx512_state", x.os_avx512_state), v("os_amx_state", x.os_amx_state);
  v("l2_cache_bytes", x.l2_cache_bytes), v("l3_cache_bytes", x.l3_cache_bytes);
  v("frequency_mhz", x.frequency_mhz), v("frequency_source", x.frequency_source);
}
template <typename V>
void fields(MemoryInfo& x, V& v) {
  v("total_bytes", x.total_bytes), v("available_bytes", x.available_bytes);
  v("cgroup_limit_bytes", x.cgroup_limit_bytes), v("cgroup_usage_bytes", x.cgroup_usage_bytes);
  v("effective_total_bytes", x.effective_total_bytes);
  v("effective_available_bytes", x.effective_available_bytes);
}
template <typename V>
void fields(MathLibInfo& x, V& v) {
  v("blas", x.blas), v("blas_version", x.blas_version), v("blas_core_type", x.blas_core_type);
  v("blas_code_path", x.blas_code_path), v("blas_num_threads", x.blas_num_threads);
  v("onednn_version", x.onednn_version), v("cpu_capability", x.cpu_capability);
  v("gemm_measured", x.gemm_measured), v("gemm_threads", x.gemm_threads);
  v("gemm_size", x.gemm_size), v("fp32_gemm_gflops", x.fp32_gemm_gflops);
  v("bf16_gemm_gflops", x.bf16_gemm_gflops), v("gemm_load_average", x.gemm_load_average);
  v("peak_fp32_gflops_per_core", x.peak_fp32_gflops_per_core);
  v("peak_bf16_gflops_per_core", x.peak_bf16_gflops_per_core);
  v("peak_fp32_gflops", x.peak_fp32_gflops), v("peak_bf16_gflops", x.peak_bf16_gflops);
  v("fp32_efficiency", x.fp32_efficiency), v("bf16_efficiency", x.bf16_efficiency);
  v("peak_assumption", x.peak_assumption);
}
template <typename V>
void fields(EnvInfo& x, V& v) {
  v("allocator", x.allocator), v("allocator_detail", x.allocator_detail);
  v("jemalloc_dirty_decay_ms", x.jemalloc_dirty_decay_ms);
  v("omp_num_threads", x.omp_num_threads), v("mkl_num_threads", x.mkl_num_threads);
  v("openblas_num_threads", x.openblas_num_threads), v("openblas_coretype", x.openblas_coretype);
  v("malloc_arena_max", x.malloc_arena_max), v("malloc_conf", x.malloc_conf);
  v("ld_preload", x.ld_preload);
  v("torch_intra_op_threads", x.torch_intra_op_threads);
  v("torch_inter_op_threads", x.torch_inter_op_threads);
}
template <typename V>
void fields(GpuInfo& x, V& v) {
  v("index", x.index), v("name", x.name), v("cc_major", x.cc_major), v("cc_minor", x.cc_minor);
  v("total_memory_bytes", x.total_memory_bytes), v("free_memory_bytes", x.free_memory_bytes);
  v("num_sms", x.num_sms), v("bf16", x.bf16), v("tf32", x.tf32);
  v("peak_bf16_tflops", x.peak_bf16_tflops), v("peak_fp16_tflops", x.peak_fp16_tflops);
  v("interconnect", x.interconnect), v("link_bandwidth_gbs", x.link_bandwidth_gbs);
  v("usable_by_torch", x.usable_by_torch);
}
template <typename V>
void fields(SoftwareInfo& x, V& v) {
  v("torch_version", x.torch_version), v("torch_cuda", x.torch_cuda);
  v("torch_openmp", x.torch_openmp), v("torch_mkldnn", x.torch_mkldnn), v("torch_mkl", x.torch_mkl);
  v("parallel_backend", x.parallel_backend), v("cuda_build_version", x.cuda_build_version);
  v("cudnn_version", x.cudnn_version), v("nccl_version", x.nccl_version);
  v("gpu_driver_version", x.gpu_driver_version), v("cuda_driver_version", x.cuda_driver_version);
  v("compiler", x.compiler), v("hwtrain_version", x.hwtrain_version);
}
template <typename V>
void fields(HardwareProfile& x, V& v) {
  v("source", x.source), v("cpu", x.cpu), v("memory", x.memory), v("math", x.math);
  v("env", x.env), v("gpus", x.gpus), v("num_nodes", x.num_nodes);
  v("inter_node_link", x.inter_node_link), v("software", x.software);
}

// In the order of enum class Allocator, so index i names Allocator(i).
const std::vector<std::string> kAllocators = {"glibc", "jemalloc", "tcmalloc", "mimalloc", "other"};

// ---- writer ----
struct Writer {
  json out = json::object();
  template <typename T>
  void operator()(const char* key, T& value) {
    out[key] = encode(value);
  }
  template <typename T>
  static json encode(T& value) {
    if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
      return value;
    } else if constexpr (std::is_same_v<T, Allocator>) {
      return to_string(value);
    } else if constexpr (std::is_same_v<T, std::vector<GpuInfo>>) {
      json a = json::array();
      for (GpuInfo& g : value) a.push_back(encode(g));
      return a;
    } else {
      Writer w;
      fields(value, w);
      return w.out;
    }
  }
};

// ---- strict reader ----
struct Reader {
  const json& in;
  std::string prefix;  // "cpu." for nested objects
  const std::string& what;
  std::set<std::string> seen;

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw HardwareError(what + ": key '" + prefix + key + "' " + problem);
  }

  template <typename T>
  void operator()(const char* key, T& value) {
    seen.insert(key);
    auto it = in.find(key);
    if (it == in.end()) fail(key, "is missing");
    decode(key, *it, value);
  }

  void expect(bool ok, const std::string& key, const char* type, const json& j) const {
    if (!ok) fail(key, std::string("must be ") + type + ", found " + j.dump());
  }

  template <typename T>
  void decode(const std::string& key, const json& j, T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      expect(j.is_boolean(), key, "true or false", j);
      value = j.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      expect(j.is_number_integer(), key, "an integer", j);
      if (j.is_number_unsigned() ? j.get<uint64_t>() > uint64_t(std::numeric_limits<T>::max())
                                 : j.get<int64_t>() < int64_t(std::numeric_limits<T>::min()) ||
                                       j.get<int64_t>() > int64_t(std::numeric_limits<T>::max()))
        fail(key, "is out of range: " + j.dump());
      value = j.get<T>();
    } else if constexpr (std::is_floating_point_v<T>) {
      expect(j.is_number(), key, "a number", j);
      value = j.get<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      expect(j.is_string(), key, "a string", j);
      value = j.get<std::string>();
    } else if constexpr (std::is_same_v<T, Allocator>) {
      expect(j.is_string(), key, "a string", j);
      std::string s = j.get<std::string>();
      for (size_t i = 0; i < kAllocators.size(); ++i)
        if (s == kAllocators[i]) value = static_cast<Allocator>(i);
      if (s != to_string(value))
        fail(key, "is '" + s + "'; valid: " + join(kAllocators) + did_you_mean(s, kAllocators));
    } else if constexpr (std::is_same_v<T, std::vector<GpuInfo>>) {
      expect(j.is_array(), key, "an array", j);
      value.clear();
      for (size_t i = 0; i < j.size(); ++i) {
        GpuInfo g;
        decode(key + "[" + std::to_string(i) + "]", j[i], g);
        value.push_back(g);
      }
    } else {
      expect(j.is_object(), key, "an object", j);
      Reader sub{j, prefix + key + ".", what, {}};
      fields(value, sub);
      sub.finish();
    }
  }

  void finish() const {
    std::vector<std::string> known(seen.begin(), seen.end());
    for (auto it = in.begin(); it != in.end(); ++it)
      if (seen.count(it.key()) == 0) fail(it.key(), "is unknown" + did_you_mean(it.key(), known));
  }
};

void check_positive(bool ok, const std::string& what, const std::string& key, const json& value) {
  if (!ok) throw HardwareError(what + ": key '" + key + "' must be positive, found " + value.dump());
}

}  // namespace

json to_json(const HardwareProfile& profile) {
  HardwareProfile copy = profile;
  Writer w;
  w.out["version"] = kFormatVersion;
  fields(copy, w);
  return w.out;
}

HardwareProfile hardware_from_json(const json& j, const std::string& what) {
  if (!j.is_object()) throw HardwareError(what + ": expected a JSON object, found " + j.type_name());
  if (j.contains("preset")) {
    // {"preset": "h100-80gb", "num_gpus": 8}: plan for a named machine.
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "preset" && it.key() != "num_gpus")
        throw HardwareError(what + ": key '" + it.key() +
                            "' is unknown next to 'preset' (valid: preset, num_gpus)");
    if (!j["preset"].is_string())
      throw HardwareError(what + ": key 'preset' must be a string, found " + j["preset"].dump());
    std::string name = j["preset"].get<std::string>();
    int num_gpus = 1;
    if (j.contains("num_gpus")) {
      if (!j["num_gpus"].is_number_integer() || j["num_gpus"].get<int64_t>() < 1)
        throw HardwareError(what + ": key 'num_gpus' must be a positive integer, found " +
                            j["num_gpus"].dump());
      num_gpus = j["num_gpus"].get<int>();
    }
    auto preset = hardware_preset(name, num_gpus);
    if (!preset)
      throw HardwareError(what + ": key 'preset' is '" + name + "', not a known preset; valid: " +
                          join(hardware_preset_names()) + did_you_mean(name, hardware_preset_names()));
    return *preset;
  }
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != kFormatVersion)
    throw HardwareError(what + ": key 'version' must be " + std::to_string(kFormatVersion) +
                        " (written by `hwtrain doctor --json`), found " +
                        (version == j.end() ? std::string("nothing") : version->dump()));
  HardwareProfile p;
  Reader r{j, "", what, {"version"}};
  fields(p, r);
  r.finish();
  check_positive(p.cpu.num_physical_cores >= 1, what, "cpu.num_physical_cores",
                 j["cpu"]["num_physical_cores"]);
  check_positive(p.cpu.num_logical_threads >= 1, what, "cpu.num_logical_threads",
                 j["cpu"]["num_logical_threads"]);
  check_positive(p.memory.total_bytes > 0, what, "memory.total_bytes", j["memory"]["total_bytes"]);
  check_positive(p.num_nodes >= 1, what, "num_nodes", j["num_nodes"]);
  for (size_t i = 0; i < p.gpus.size(); ++i)
    check_positive(p.gpus[i].total_memory_bytes > 0, what,
                   "gpus[" + std::to_string(i) + "].total_memory_bytes",
                   j["gpus"][i]["total_memory_bytes"]);
  return p;
}

}  // namespace hwt
