#include "hwtrain/train/torch_profiler.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "hwtrain/core/files.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

TorchProfiler::TorchProfiler(TorchProfilerOptions options) : options_(options) {}

TorchProfiler::~TorchProfiler() {
  if (!active_) return;
  try {
    end_step();
    prof::disableProfiler();
  } catch (...) {
    // Destructors must not throw; a profile abandoned mid-way is simply dropped.
  }
}

bool TorchProfiler::start() {
  if (active_) return true;
  std::set<ActivityType> activities{ActivityType::CPU};
  const bool cuda = options_.cuda && torch::cuda::is_available();
  if (cuda) activities.insert(ActivityType::CUDA);
  ProfilerConfig config(ProfilerState::KINETO, options_.record_shapes, options_.record_memory);
  try {
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
  } catch (const std::exception& e) {
    warn_once("torch-profiler", std::string("LibTorch's profiler is unavailable (") + e.what() +
                                    "); the trace shows step phases only, without operators");
    return false;
  }
  active_ = true;
  log_info("profiler: recording {} operators{}", cuda ? "CPU and CUDA" : "CPU",
           options_.record_memory ? " and memory" : "");
  return true;
}

void TorchProfiler::begin_step(int64_t step) {
  if (!active_) return;
  end_step();
  step_range_ = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (step_range_->isActive()) step_range_->before("ProfilerStep#" + std::to_string(step));
}

void TorchProfiler::end_step() {
  if (step_range_) {
    step_range_->end();
    step_range_.reset();
  }
}

bool TorchProfiler::stop_and_save(const std::filesystem::path& path) {
  if (!active_) return false;
  end_step();
  active_ = false;
  try {
    auto result = prof::disableProfiler();
    if (!result) {
      log_warn("profiler: LibTorch returned no result; {} not written", path.string());
      return false;
    }
    // Kineto writes the file itself; a temporary name and a rename keep readers from a partial one.
    std::filesystem::create_directories(path.parent_path());
    const auto tmp = temp_sibling(path);
    result->save(tmp.string());
    std::error_code ec;
    if (!std::filesystem::is_regular_file(tmp, ec)) {  // Kineto logs its own failures, throws none
      log_warn("profiler: LibTorch could not write the operator trace {}", path.string());
      return false;
    }
    std::filesystem::rename(tmp, path);
    log_info("profiler: operator trace {} ({} events)", path.string(), result->events().size());
    return true;
  } catch (const std::exception& e) {
    log_warn("profiler: could not write the operator trace {}: {}", path.string(), e.what());
    return false;
  }
}

}  // namespace hwt
