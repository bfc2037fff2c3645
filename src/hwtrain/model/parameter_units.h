// Parameter units: the model's parameters grouped as sharding gathers and frees them (ZeRO-3 /
// FSDP's "units", dist/sharded_parameters.h): one per decoder block, in order, then one for the
// rest (token and position embeddings, the final norm and an untied head), which the forward uses
// first and last. UnitHooks is the seam through which a sharding engine makes a unit's parameters
// present while it runs: the GPT calls before_forward(u) before unit u's forward (also before the
// recomputation of a checkpointed block in backward, which calls the block again) and passes each
// block's output through after_forward(u, out), where the engine can hook the block's backward.
#pragma once
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace hwt {

struct ParameterUnit {
  std::string name;                                          // "h.3", "rest"
  std::vector<std::pair<std::string, torch::Tensor>> params;  // full names, registration order
};

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(size_t unit) = 0;
  virtual torch::Tensor after_forward(size_t unit, const torch::Tensor& out) = 0;
};

}  // namespace hwt
