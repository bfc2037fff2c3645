#include "hwtrain/obs/nvml.h"

#include <memory>

#include "hwtrain/obs/nvml_library.h"

namespace hwt {

// The subset of nvml.h used here, declared by hand because the header is not installed. A named
// namespace, not an anonymous one: GCC 13.3 crashed (internal compiler error) on Nvml::Api, a type
// with external linkage, holding pointers to functions of internal-linkage types.
namespace nvml_abi {
using nvmlReturn_t = int;  // 0 = NVML_SUCCESS
using nvmlDevice_t = void*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kNvmlTemperatureGpu = 0;
}  // namespace nvml_abi
using namespace nvml_abi;

struct Nvml::Api {
  nvmlReturn_t (*device_count)(unsigned int*);
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*);
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*);
};

namespace {
template <class F>
bool load(const NvmlLibrary& lib, const char* name, F& fn) {
  fn = lib.symbol<F>(name);
  return fn != nullptr;
}
}  // namespace

Nvml::Nvml() {
  const NvmlLibrary& lib = NvmlLibrary::instance();
  if (!lib.loaded()) return;
  auto api = std::make_unique<Api>();
  const bool ok = load(lib, "nvmlDeviceGetCount_v2", api->device_count) &&
                  load(lib, "nvmlDeviceGetHandleByIndex_v2", api->handle_by_index) &&
                  load(lib, "nvmlDeviceGetUtilizationRates", api->utilization) &&
                  load(lib, "nvmlDeviceGetMemoryInfo", api->memory) &&
                  load(lib, "nvmlDeviceGetTemperature", api->temperature) &&
                  load(lib, "nvmlDeviceGetPowerUsage", api->power);
  unsigned int count = 0;
  if (!ok) return;
  if (api->device_count(&count) != 0) count = 0;
  api_ = api.release();
  num_gpus_ = static_cast<int>(count);
}

Nvml::~Nvml() { delete api_; }

std::vector<GpuSample> Nvml::sample() const {
  std::vector<GpuSample> out;
  for (int i = 0; i < num_gpus_; ++i) {
    nvmlDevice_t dev = nullptr;
    if (api_->handle_by_index(static_cast<unsigned>(i), &dev) != 0) continue;
    GpuSample g;
    g.index = i;
    nvmlUtilization_t util{};
    if (api_->utilization(dev, &util) == 0) g.utilization_percent = util.gpu;
    nvmlMemory_t mem{};
    if (api_->memory(dev, &mem) == 0) {
      g.memory_used_bytes = static_cast<double>(mem.used);
      g.memory_total_bytes = static_cast<double>(mem.total);
    }
    unsigned int temp = 0;
    if (api_->temperature(dev, kNvmlTemperatureGpu, &temp) == 0) g.temperature_celsius = temp;
    unsigned int milliwatts = 0;
    if (api_->power(dev, &milliwatts) == 0) g.power_watts = milliwatts / 1000.0;
    out.push_back(g);
  }
  return out;
}

}  // namespace hwt
