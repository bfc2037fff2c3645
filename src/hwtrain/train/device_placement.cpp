#include "hwtrain/train/device_placement.h"

#include "hwtrain/core/error.h"

namespace hwt {

bool on_planned_device(const torch::Device& actual, const torch::Device& planned) {
  if (actual.type() != planned.type()) return false;
  return !planned.has_index() || !actual.has_index() || actual.index() == planned.index();
}

void verify_placement(const std::string& what, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const torch::Device& planned) {
  for (const auto& [name, t] : tensors) {
    if (!t.defined() || on_planned_device(t.device(), planned)) continue;
    throw ConfigError(what + " '" + name + "' is on " + t.device().str() + " but the plan trains on " + planned.str() +
                      "; move the model to the planned device before training (HardwareAwareOptimizer::"
                      "apply_optimizations does it) or plan for " + t.device().str());
  }
}

}  // namespace hwt
