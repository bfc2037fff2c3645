// GptModel: the built-in decoder families (GPT, model/gpt.h) as a TrainableModel. Rows are token
// windows: x and y are [N, T] int64 ids, y shifted by one. It forwards everything to the GPT it
// holds: the fused LM-head loss, the weight-decay split, activation checkpointing of every k-th
// block, the per-block sharding units with their hooks, and training FLOPs with attention's
// 12 L C T term (PaLM appendix B / nanoGPT).
#pragma once
#include "hwtrain/model/gpt.h"
#include "hwtrain/model/trainable_model.h"

namespace hwt {

// A tensor-parallel GPT's checkpoint tensors (whole from this rank's shards, collective over the
// tensor group; cut back to them) and its share of the squared gradient norm (the weights every
// rank holds whole count 1/size each). Identity without tensor parallelism.
NamedParameters tensor_parallel_whole(GPTImpl& gpt, NamedParameters local);
NamedParameters tensor_parallel_local(const GPTImpl& gpt, NamedParameters whole);
torch::Tensor tensor_parallel_norm_share(GPTImpl& gpt, const torch::Tensor& local_squared, const NamedParameters& grads);

class GptModel : public TrainableModel {
 public:
  explicit GptModel(GPT gpt) : gpt_(std::move(gpt)) {}
  torch::nn::Module& module() override { return *gpt_; }
  torch::Tensor forward_loss(const torch::Tensor& x_BT, const torch::Tensor& y_BT) override {
    return gpt_->forward_loss(x_BT, y_BT);
  }
  void named_decay_and_no_decay(NamedParameters& decay, NamedParameters& no_decay) override {
    gpt_->named_decay_and_no_decay(decay, no_decay);
  }
  bool set_activation_checkpointing(int64_t every_k) override {
    gpt_->set_activation_checkpointing(every_k);
    return true;
  }
  // Its loss is computed in fp32 whatever the autocast dtype (GPT::loss): cast_outputs always holds.
  bool set_cast_outputs(bool on) override { return on; }
  std::vector<ParameterUnit> parameter_units() override { return gpt_->parameter_units(); }
  bool supports_unit_hooks() const override { return true; }
  void set_unit_hooks(std::shared_ptr<UnitHooks> hooks) override { gpt_->set_unit_hooks(std::move(hooks)); }
  // row_elements = T; the same figure as training_flops_per_token(config, parameters) x T.
  double training_flops_per_row(int64_t row_elements) override;
  std::string checkpoint_format() const override { return "hwtrain-gpt"; }
  // Tensor parallel (GPT::set_tensor_parallel): checkpoints hold whole tensors; rank 0 of the
  // tensor group writes them.
  bool model_parallel() const override { return gpt_->tensor_parallel() != nullptr; }
  NamedParameters whole_tensors(NamedParameters local) override { return tensor_parallel_whole(*gpt_, std::move(local)); }
  NamedParameters local_tensors(NamedParameters whole) const override {
    return tensor_parallel_local(*gpt_, std::move(whole));
  }
  bool checkpoint_writer() const override { return !gpt_->tensor_parallel() || gpt_->tensor_parallel()->rank() == 0; }
  // The weights every rank of the tensor group holds whole (norms, biases of row-parallel layers)
  // count once: each rank contributes 1/size of their squares.
  torch::Tensor squared_norm_share(const torch::Tensor& local_squared, const NamedParameters& grads) override {
    return tensor_parallel_norm_share(*gpt_, local_squared, grads);
  }
  void sum_shared_gradients(const NamedParameters& grads) override { gpt_->sum_sequence_parallel_gradients(grads); }
  void model_parallel_sum(torch::Tensor& t) override {
    if (gpt_->tensor_parallel()) gpt_->tensor_parallel()->all_reduce_sum(t);
  }

  GPT& gpt() { return gpt_; }

 private:
  GPT gpt_;
};

// Model FLOPs per trained token: 6 N plus attention's 12 L C T (PaLM appendix B / nanoGPT).
double training_flops_per_token(const ModelConfig& model, int64_t num_params);

}  // namespace hwt
