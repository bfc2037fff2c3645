// Device placement check: the weights, optimizer state and batches a step works on live on the
// plan's device. A tensor elsewhere (a parameter left on the CPU by a hand-built model, state
// loaded to the wrong device) would otherwise surface as an obscure kernel error mid-step, or
// silently run on the CPU; this names it once, before training.
#pragma once
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace hwt {

// True when a tensor on `actual` runs on `planned` ("cuda" without an index matches any CUDA device).
bool on_planned_device(const torch::Device& actual, const torch::Device& planned);

// ConfigError "<what> '<name>' is on <device> but the plan trains on <planned>; ..." for the first
// tensor not on `planned`. Undefined tensors (parameters without a gradient yet) are skipped.
void verify_placement(const std::string& what, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const torch::Device& planned);

}  // namespace hwt
