// NvmlLibrary: NVIDIA's management library, loaded once per process at run time with
// dlopen("libnvidia-ml.so.1") and initialised once, never linked: on a machine without the driver
// loaded() is false and error() says why. The one loader that the hardware detection (hw/nvml.h:
// names, links, driver versions) and the run-time monitor (obs/nvml.h: utilization, power) share.
// It stays loaded and initialised for the life of the process (NVML's init is reference-counted;
// unloading it while the CUDA driver holds it is not worth the risk).
#pragma once
#include <string>

namespace hwt {

class NvmlLibrary {
 public:
  // The process's library, loaded and initialised on first use; thread-safe; never throws.
  static const NvmlLibrary& instance();

  bool loaded() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  // The entry point `name` as a function pointer of type Fn, or null (also when not loaded).
  template <class Fn>
  Fn symbol(const char* name) const {
    return reinterpret_cast<Fn>(raw_symbol(name));
  }

 private:
  NvmlLibrary();
  void* raw_symbol(const char* name) const;
  void* handle_ = nullptr;
  std::string error_;
};

}  // namespace hwt
