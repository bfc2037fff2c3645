// TrainableModel: what the Trainer, the sharding engine and checkpoints need of a model, so that
// they train the built-in GPT/Llama family (GptModel, model/gpt_model.h) and a user's own
// torch::nn::Module alike. A user's model implements forward_loss and module() in a few lines
// (ModuleModel below does it for a module and a loss function); the rest has defaults:
//   - weight decay on parameters of two or more dimensions (matrices, convolution kernels), none
//     on biases and norms (nanoGPT's and timm's rule);
//   - no activation checkpointing (train_model applies the plan's and logs when a model cannot);
//   - one sharding unit holding every parameter, without unit hooks: ZeRO-3 needs hooks and is
//     refused, ZeRO-1/2 and data parallelism work;
//   - training FLOPs of 6 x parameters per token of a row (ExampleSource::tokens_per_example, 1
//     for plain samples), a floor that ignores attention-like terms;
//   - no memory description: the batch size is then found by measured probe steps.
// Parameters and buffers are saved and restored by their module names.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/model/parameter_units.h"
#include "hwtrain/model/pipeline_stage.h"

namespace hwt {

using NamedParameters = std::vector<std::pair<std::string, torch::Tensor>>;

// What the planner's memory model may use instead of a probe: bytes a row's activations keep for
// backward, at the training precision (fp32 or a 16-bit dtype).
struct ModelMemoryDescription {
  double activation_bytes_per_row_fp32 = 0;
  double activation_bytes_per_row_16bit = 0;
};

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;

  // The module whose parameters are trained and whose parameters and buffers are checkpointed.
  virtual torch::nn::Module& module() = 0;
  // The mean loss of a batch (inputs x, targets y, stacked rows): a scalar, in fp32 preferably.
  virtual torch::Tensor forward_loss(const torch::Tensor& x, const torch::Tensor& y) = 0;

  // Every parameter in exactly one list; each named as in module().named_parameters().
  virtual void named_decay_and_no_decay(NamedParameters& decay, NamedParameters& no_decay);
  // 0 = none, k = every k-th block recomputed in backward. Returns whether the model applied it
  // (the default applies only 0).
  virtual bool set_activation_checkpointing(int64_t every_k) { return every_k == 0; }
  // optimization.cast_outputs: the output cast to fp32 before the loss under autocast. Returns
  // whether the model carries it out (the default: no, its forward_loss decides).
  virtual bool set_cast_outputs(bool /*on*/) { return false; }
  // Sharding units in forward order (model/parameter_units.h); default: one unit "all".
  virtual std::vector<ParameterUnit> parameter_units();
  // Whether set_unit_hooks() is carried out (ZeRO-3 gathers units through them).
  virtual bool supports_unit_hooks() const { return false; }
  virtual void set_unit_hooks(std::shared_ptr<UnitHooks> hooks);
  // Model FLOPs of one training row (forward and backward) of `row_elements` tokens.
  virtual double training_flops_per_row(int64_t row_elements);
  virtual std::optional<ModelMemoryDescription> memory_description() const { return std::nullopt; }
  // The format tag of its checkpoints' weights file ("hwtrain-gpt"; "hwtrain-module" otherwise).
  virtual std::string checkpoint_format() const { return "hwtrain-module"; }

  // Model parallelism (a tensor-parallel GPT): this rank holds shards, checkpoints hold whole
  // tensors, so that a run resumes on any layout. whole_tensors joins this rank's shards of
  // parameters, buffers or their optimizer state ("exp_avg.<name>", ...) into whole tensors
  // (collective: every rank of the model-parallel group calls it with the same names);
  // local_tensors cuts whole ones to this rank's shards. checkpoint_writer: whether this rank's
  // copy is written (one rank per model replica). squared_norm_share: this rank's share of the whole
  // model's squared gradient norm, given the squared norm of `grads` (a weight several ranks hold
  // counted once in the sum over the group); model_parallel_sum: a tensor summed over the group (in place).
  // `grads`, here and in sum_shared_gradients: the averaged gradients by parameter name, either the
  // parameters' own (own_gradients) or, under ZeRO-2/3, this rank's 1-D shard of each
  // (GradientSync::gradient_shards), which the model-parallel ranks holding one weight lay out alike.
  // pipeline_stage: the model as one stage of a pipeline, trained by the 1F1B schedule. The
  // defaults: every rank holds the whole model.
  virtual bool model_parallel() const { return false; }
  virtual NamedParameters whole_tensors(NamedParameters local) { return local; }
  virtual NamedParameters local_tensors(NamedParameters whole) const { return whole; }
  virtual bool checkpoint_writer() const { return true; }
  virtual torch::Tensor squared_norm_share(const torch::Tensor& local_squared, const NamedParameters& /*grads*/) {
    return local_squared;
  }
  virtual void model_parallel_sum(torch::Tensor& /*t*/) {}
  // After the step's backwards (and data-parallel reduction): weights several model-parallel ranks
  // hold get their whole gradient (sequence-parallel norms' partial sums, a tied embedding's two
  // pipeline copies), summed in place in `grads`. Collective over the model-parallel group.
  virtual void sum_shared_gradients(const NamedParameters& /*grads*/) {}
  NamedParameters own_gradients();  // each parameter's defined .grad, by name
  virtual PipelineStage* pipeline_stage() { return nullptr; }

  int64_t num_parameters();
};

// A module and its loss: loss(module_output, y) must return a scalar. The module's forward is
// called as forward(x) through `forward` (a lambda capturing the module), so any module works.
class ModuleModel : public TrainableModel {
 public:
  using Forward = std::function<torch::Tensor(const torch::Tensor&)>;
  using Loss = std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)>;
  ModuleModel(std::shared_ptr<torch::nn::Module> module, Forward forward, Loss loss);
  torch::nn::Module& module() override { return *module_; }
  // loss(forward(x), y); the Trainer checks that it is a scalar (check_scalar_loss), every model's.
  torch::Tensor forward_loss(const torch::Tensor& x, const torch::Tensor& y) override;
  bool set_cast_outputs(bool on) override {
    cast_outputs_ = on;
    return true;
  }

 private:
  bool cast_outputs_ = true;
  std::shared_ptr<torch::nn::Module> module_;
  Forward forward_;
  Loss loss_;
};

// ModuleModel for a module holder with forward(x), e.g. make_module_model(Mlp(), torch::mse_loss).
template <typename Holder, typename LossFn>
std::shared_ptr<ModuleModel> make_module_model(Holder holder, LossFn loss) {
  auto module = holder.ptr();
  return std::make_shared<ModuleModel>(
      module, [module](const torch::Tensor& x) { return module->forward(x); },
      [loss](const torch::Tensor& out, const torch::Tensor& y) { return loss(out, y); });
}

// The same for ATen's losses that take a reduction (torch::mse_loss, torch::l1_loss, ...): mean.
template <typename Holder>
std::shared_ptr<ModuleModel> make_module_model(Holder holder,
                                               torch::Tensor (*loss)(const torch::Tensor&, const torch::Tensor&, int64_t)) {
  return make_module_model(std::move(holder), [loss](const torch::Tensor& out, const torch::Tensor& y) {
    return loss(out, y, at::Reduction::Mean);
  });
}

// ConfigError naming both names of a parameter registered twice (a tied weight registered in two
// modules): LibTorch's named_parameters() lists it twice, where Python's removes duplicates.
void check_parameters_registered_once(torch::nn::Module& module);

// ConfigError "<what>: the loss has shape [..]; it must be a scalar ..." unless `loss` is 0-dim.
void check_scalar_loss(const torch::Tensor& loss, const std::string& what);

}  // namespace hwt
