#include "hwtrain/obs/nvml_library.h"

#include <dlfcn.h>

namespace hwt {

const NvmlLibrary& NvmlLibrary::instance() {
  static const NvmlLibrary library;  // thread-safe initialisation
  return library;
}

NvmlLibrary::NvmlLibrary() {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    error_ = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
    return;
  }
  auto init = reinterpret_cast<int (*)()>(::dlsym(lib, "nvmlInit_v2"));
  if (init == nullptr) {
    error_ = "libnvidia-ml.so.1 lacks nvmlInit_v2 (driver too old)";
    ::dlclose(lib);
    return;
  }
  if (init() != 0) {  // 0 = NVML_SUCCESS
    error_ = "nvmlInit failed (driver not loaded)";
    ::dlclose(lib);
    return;
  }
  handle_ = lib;
}

void* NvmlLibrary::raw_symbol(const char* name) const { return handle_ ? ::dlsym(handle_, name) : nullptr; }

}  // namespace hwt
