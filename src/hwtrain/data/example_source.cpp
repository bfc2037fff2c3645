#include "hwtrain/data/example_source.h"

#include "hwtrain/core/error.h"

namespace hwt {

TensorExamples::TensorExamples(torch::Tensor inputs, torch::Tensor targets, std::string name)
    : inputs_(inputs.to(torch::kCPU).contiguous()), targets_(targets.to(torch::kCPU).contiguous()),
      name_(std::move(name)) {
  if (inputs_.dim() == 0 || targets_.dim() == 0 || inputs_.size(0) != targets_.size(0) || inputs_.size(0) == 0) {
    throw ConfigError(name_ + ": inputs " + std::to_string(inputs_.dim() ? inputs_.size(0) : 0) + " rows and targets " +
                      std::to_string(targets_.dim() ? targets_.size(0) : 0) +
                      " rows; valid: the same number of rows (first dimension), at least 1");
  }
}

}  // namespace hwt
