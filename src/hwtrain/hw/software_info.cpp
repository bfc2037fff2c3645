// Software stack detection (see software_info.h).
#include "hwtrain/hw/software_info.h"

#include <ATen/Config.h>
#include <ATen/Context.h>
#include <ATen/Version.h>
#include <dlfcn.h>
#include <torch/torch.h>

#include "hwtrain/hw/math_libs.h"

#ifndef HWTRAIN_COMPILER
#define HWTRAIN_COMPILER "unknown"
#endif
#ifndef HWTRAIN_VERSION
#define HWTRAIN_VERSION "unknown"
#endif

namespace hwt {

std::string nccl_version_string(int code) {
  if (code <= 0) return "";
  int major, minor, patch;
  if (code >= 10000) {
    major = code / 10000;
    minor = (code % 10000) / 100;
  } else {
    major = code / 1000;
    minor = (code % 1000) / 100;
  }
  patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

SoftwareInfo detect_software() {
  SoftwareInfo s;
  std::string config = at::show_config();
  s.torch_version = TORCH_VERSION;
  std::string use_cuda = build_setting(config, "USE_CUDA");
  s.torch_cuda = use_cuda == "ON" || use_cuda == "1";
  s.torch_openmp = at::hasOpenMP();
  s.torch_mkldnn = at::hasMKLDNN();
  s.torch_mkl = at::hasMKL();
#if AT_PARALLEL_OPENMP
  s.parallel_backend = "OpenMP";
#else
  s.parallel_backend = "native";
#endif
  if (s.torch_cuda) {
    s.cuda_build_version = build_setting(config, "CUDA_VERSION");
    s.cudnn_version = build_setting(config, "CUDNN_VERSION");
    // The libraries LibTorch loaded may be newer than the ones it was built against.
    auto cudnn = reinterpret_cast<size_t (*)()>(dlsym(RTLD_DEFAULT, "cudnnGetVersion"));
    if (cudnn != nullptr) {
      // cuDNN 9 encodes major*10000 + minor*100 + patch, cuDNN 8 major*1000 + minor*100 + patch.
      size_t v = cudnn();
      size_t major = v >= 90000 ? v / 10000 : v / 1000;
      size_t minor = v >= 90000 ? (v % 10000) / 100 : (v % 1000) / 100;
      if (v > 0)
        s.cudnn_version = std::to_string(major) + "." + std::to_string(minor) + "." +
                          std::to_string(v % 100);
    }
    auto nccl = reinterpret_cast<int (*)(int*)>(dlsym(RTLD_DEFAULT, "ncclGetVersion"));
    int code = 0;
    if (nccl != nullptr && nccl(&code) == 0) s.nccl_version = nccl_version_string(code);
    std::string use_nccl = build_setting(config, "USE_NCCL");
    if (s.nccl_version.empty() && (use_nccl == "1" || use_nccl == "ON")) s.nccl_version = "built in";
  }
  s.compiler = HWTRAIN_COMPILER;
  s.hwtrain_version = HWTRAIN_VERSION;
  return s;
}

}  // namespace hwt
