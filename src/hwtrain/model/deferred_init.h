// Deferred initialization: a model built for sharding (ZeRO-2/3) or splitting (tensor and pipeline
// parallelism) without any rank ever holding all of its fp32 weights, as FSDP's meta-device init does
// for Python users, and with exactly the values the ordinary build gives under the same seed (so
// sharded and split runs still match one process). Each rank fills only what it keeps: a unit at a
// time into its shards, its tensor-parallel cut of each weight (cut()), its pipeline stage's weights.
//
// The ordinary build constructs every module (each Linear and Embedding draws its default init from
// the global CPU generator), then redraws the weights (GPT-2's or Llama's init). A deferred build does
// the same draws in the same order, so the generator ends where the ordinary build leaves it, but:
//   - after each unit is constructed, its parameters become placeholders: the parameter's shape
//     over one element of storage (its 1-D parameters, norms and biases, keep a copy of their values:
//     O(n_embd) each);
//   - each redraw is recorded, not applied: the generator's state before it and the distribution.
//     The draw itself goes to a scratch tensor of the parameter's shape, freed at once, which moves
//     the generator exactly as drawing into the parameter would;
//   - materialize() later writes one parameter's value, by replaying its recorded draw from a copy of
//     the saved generator state: a sharding engine fills one unit at a time, keeps its shard, frees it.
// Peak memory of the build: one unit, or the largest single weight (the embedding), not the model.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hwt {

// A tensor that holds fewer elements of storage than its shape (a placeholder's stride-0 view).
bool is_placeholder(const torch::Tensor& t);

// Gives `param` the value `value` (a copy of it, in param's dtype and on its device): copied in place,
// or for a placeholder, its data replaced (e.g. a resumed checkpoint's or a Hugging Face directory's
// weights, which the sharding engine then cuts like any other value).
void assign_parameter(torch::Tensor& param, const torch::Tensor& value);

class DeferredInit {
 public:
  // Construction: every parameter of `module` becomes a placeholder (on its device, in its dtype);
  // 1-D ones keep their value. `prefix` names them in errors ("h.3.").
  void release(torch::nn::Module& module, const std::string& prefix);
  // Init: the value a `param.normal_(mean, std)` or `param.fill_(value)` now would give. normal()
  // advances the global CPU generator as the draw would.
  void normal(const torch::Tensor& param, double mean, double std);
  void fill(const torch::Tensor& param, double value);
  // Tensor parallelism: the placeholder's value becomes keep(value) (this rank's cut of the whole
  // weight, model/tensor_parallel.h's shard_of), and the placeholder takes keep's shape.
  using Cut = std::function<torch::Tensor(const torch::Tensor& whole)>;
  void cut(torch::Tensor& param, Cut keep);

  // Writes param's initial value into `out` (param's shape, fp32, contiguous, on the CPU); a cut
  // parameter's whole value is drawn first (one weight at a time). Throws std::logic_error naming
  // the parameter when none was recorded.
  void materialize(const torch::Tensor& param, torch::Tensor& out) const;
  // Placeholders moved (Module::to): new ones of the same shapes on `device` / in `dtype` (keeping
  // their records), so that Module::to then finds nothing to copy.
  void retarget(torch::nn::Module& module, std::optional<torch::Device> device, std::optional<torch::Dtype> dtype);
  size_t recorded() const { return recipes_.size(); }

 private:
  struct Recipe {
    std::string name;
    enum class Kind { Unset, Normal, Fill, Values } kind = Kind::Unset;
    at::Generator generator;  // Normal: a copy of the global CPU generator before the draw
    double mean = 0, std = 0, value = 0;
    torch::Tensor values;  // Values: the parameter's value at release (1-D only)
    std::vector<int64_t> shape;  // the whole parameter's, at release
    std::vector<Cut> cuts;       // applied in order to the whole value
  };
  void draw(const Recipe& r, torch::Tensor& out) const;
  Recipe& recipe(const torch::Tensor& param);
  std::map<const c10::TensorImpl*, Recipe> recipes_;  // the parameter's impl outlives set_data
};

}  // namespace hwt
