// BLAS / oneDNN identification (see math_libs.h).
#include "hwtrain/hw/math_libs.h"

#include <ATen/Version.h>
#include <dlfcn.h>

#include <cctype>
#include <climits>
#include <cstdlib>

namespace hwt {
namespace {

template <typename Fn>
Fn find_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// Resolved path of the shared object that defines `symbol`, "" when not loaded.
std::string providing_library(const char* symbol) {
  void* addr = dlsym(RTLD_DEFAULT, symbol);
  Dl_info info{};
  if (addr == nullptr || dladdr(addr, &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[PATH_MAX];
  if (realpath(info.dli_fname, resolved) != nullptr) return resolved;
  return info.dli_fname;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void detect_openblas(MathLibInfo* math) {
  auto corename = find_symbol<char* (*)()>("openblas_get_corename");
  auto config = find_symbol<char* (*)()>("openblas_get_config");
  auto threads = find_symbol<int (*)()>("openblas_get_num_threads");
  math->blas = "openblas";
  if (config != nullptr) math->blas_version = config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
  if (corename != nullptr) math->blas_core_type = corename();
  math->blas_code_path = math->blas_core_type;
  // OpenBLAS built with pthreads keeps its own pool next to LibTorch's OpenMP threads.
  if (threads != nullptr) math->blas_num_threads = threads();
}

void detect_mkl(MathLibInfo* math) {
  math->blas = "mkl";
  auto version = find_symbol<void (*)(char*, int)>("MKL_Get_Version_String");
  if (version != nullptr) {
    char buf[256] = {};
    version(buf, sizeof(buf) - 1);
    std::string v = version_after(buf, "Version ");
    math->blas_version = v.empty() ? std::string(buf) : "oneMKL " + v;
  } else {
    math->blas_version = at::get_mkl_version();
  }
  auto code_path = find_symbol<int (*)()>("mkl_serv_cpu_detect");
  if (code_path != nullptr) math->blas_code_path = mkl_code_path_name(code_path());
  auto threads = find_symbol<int (*)()>("mkl_get_max_threads");
  if (threads != nullptr) math->blas_num_threads = threads();
}

}  // namespace

std::string build_setting(const std::string& config, const std::string& key) {
  size_t start = config.find("Build settings:");
  if (start == std::string::npos) start = 0;
  std::string needle = key + "=";
  size_t pos = start;
  while ((pos = config.find(needle, pos)) != std::string::npos) {
    // Whole key only: "CUDA_VERSION" must not match inside "USE_CUDA_VERSION".
    if (pos == 0 || config[pos - 1] == ' ' || config[pos - 1] == ',' || config[pos - 1] == ':') {
      size_t begin = pos + needle.size();
      size_t end = config.find_first_of(",\n", begin);
      std::string v = config.substr(begin, end == std::string::npos ? end : end - begin);
      while (!v.empty() && v.front() == ' ') v.erase(v.begin());
      while (!v.empty() && v.back() == ' ') v.pop_back();
      return v;
    }
    pos += needle.size();
  }
  return "";
}

std::string version_after(const std::string& text, const std::string& marker) {
  size_t pos = 0;
  while ((pos = text.find(marker, pos)) != std::string::npos) {
    size_t begin = pos + marker.size();
    size_t end = begin;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
      ++end;
    if (end > begin) return text.substr(begin, end - begin);
    pos = begin;
  }
  return "";
}

// mkl_serv_cpu_detect's values, as MKL's own mkl_serv_get_version names them (0 SSE2 ... 5 AVX2,
// 6 AVX-512 for Xeon Phi, 7 AVX-512); newer MKLs add higher ones for AVX-512's later extensions.
// An AVX2-only AMD EPYC running MKL's AVX2 kernels (87% of the AVX2 FMA peak) reads 5 here.
std::string mkl_code_path_name(int id) {
  switch (id) {
    case 0: return "generic (SSE2)";
    case 1: return "SSE3";
    case 2: return "SSSE3";
    case 3: return "SSE4.2";
    case 4: return "AVX";
    case 5: return "AVX2";
    case 6: return "AVX-512 (Xeon Phi)";
    case 7: return "AVX-512";
    default: return id > 7 ? "AVX-512 with later extensions (id " + std::to_string(id) + ")"
                           : "unknown (id " + std::to_string(id) + ")";
  }
}

void detect_math_libs(MathLibInfo* math) {
  std::string config = at::show_config();
  std::string built_with = build_setting(config, "BLAS_INFO");  // mkl, open, blis, generic...
  std::string provider = providing_library("sgemm_");
  if (find_symbol<char* (*)()>("openblas_get_corename") != nullptr) {
    detect_openblas(math);
  } else if (find_symbol<int (*)()>("mkl_serv_cpu_detect") != nullptr || contains(provider, "mkl")) {
    detect_mkl(math);
  } else if (contains(provider, "blis")) {
    math->blas = "blis";
  } else if (contains(provider, "flexiblas")) {
    math->blas = "flexiblas";
  } else if (contains(provider, "/blas/libblas") || contains(provider, "libblas.so") ||
             contains(provider, "librefblas")) {
    // Debian's libblas.so.3 alternative defaults to netlib's reference BLAS: no SIMD blocking.
    math->blas = "reference";
    math->blas_version = "netlib reference BLAS (" + provider + ")";
  } else if (built_with == "open") {
    math->blas = "openblas";
  } else if (!built_with.empty()) {
    math->blas = built_with;
  } else {
    math->blas = "unknown";
  }
  if (at::hasMKLDNN()) math->onednn_version = version_after(at::get_mkldnn_version(), " v");
  math->cpu_capability = at::get_cpu_capability();
}

}  // namespace hwt
