// Parameter units: the model's parameters grouped as sharding gathers and frees them (ZeRO-3 /
// FSDP's "units", dist/sharded_parameters.h), in forward order: the embeddings (with the final norm
// and tied head: "rest", used first and last), one unit per decoder block, and for an untied head
// the final norm and head ("head"). UnitHooks is the seam through which a sharding engine makes a
// unit's parameters present while it runs: the model calls before_forward(u) before unit u's
// forward (also before the recomputation of a checkpointed block in backward) and passes the output
// of each unit it is done with through after_forward(u, out), where the engine frees the unit and
// hooks its backward, or through release(u) when its backward reads none of its weights (the
// untied embeddings: an embedding's gradient needs only the token ids), where the engine frees it
// for good. Every forward calls begin_forward first (not unit 0's before_forward: on a later
// pipeline stage unit 0 is a block, recomputed in backward); a unit never passed to either (the
// head) stays until its gradients are reduced. The tied rest is released after the embeddings and comes back
// for the final norm and head through before_reuse / release_after_backward.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hwt {

// Writes a parameter's initial value into `out` (its shape, fp32, contiguous, on the CPU).
using InitialValue = std::function<void(const torch::Tensor& param, torch::Tensor& out)>;

struct ParameterUnit {
  std::string name;                                          // "h.3", "rest"
  std::vector<std::pair<std::string, torch::Tensor>> params;  // full names, registration order
  // A deferred model's (model/deferred_init.h): the values of its placeholder parameters; empty
  // when every parameter holds its value.
  InitialValue initial_value;
};

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual void before_forward(size_t unit) = 0;
  virtual torch::Tensor after_forward(size_t unit, const torch::Tensor& out) = 0;
  // The unit is done, and its backward reads none of its weights: nothing gathers it again before
  // the next forward.
  virtual void release(size_t unit) = 0;
  // Every forward starts here (the whole model's, a pipeline stage's chunk), before any unit's
  // before_forward: backward is over, so what runs next is prefetched again.
  virtual void begin_forward() {}
  // For a unit kept past its forward (a tied embedding, a head): makes it present again when the
  // gradient of `out` arrives, should it have been freed since (a pipeline stage runs the forwards
  // of several micro-batches before their backwards, and frees the unit after the first's).
  virtual torch::Tensor gather_for_backward(size_t /*unit*/, const torch::Tensor& out) { return out; }
  // A unit used a second time in the forward (the tied rest: the embeddings first, then the final
  // norm and the head), after release(unit): present again. The sharding engine prefetches nothing
  // for it; this default, for hooks without the distinction, is before_forward.
  virtual void before_reuse(size_t unit) { before_forward(unit); }
  // Passes the input of that second use: the unit may be freed once its gradient arrives (the
  // second use's backward is done then, and the first's reads only token ids).
  virtual torch::Tensor release_after_backward(size_t /*unit*/, const torch::Tensor& in) { return in; }
};

}  // namespace hwt
