// GPT under tensor parallelism: which weights are cut how (Megatron-LM's layout for both families),
// the cutting, and the vocabulary-parallel head and loss.
#include <string>

#include "hwtrain/core/error.h"
#include "hwtrain/model/column_parallel.h"
#include "hwtrain/model/gpt.h"

namespace hwt {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A parameter's cut: rows (dim 0) of column-parallel layers and the vocabulary, columns (dim 1) of
// row-parallel layers' weights; GPT-2's fused c_attn as its three blocks q | k | v.
ShardSpec parameter_spec(const std::string& name) {
  if (name == "wte.weight" || name == "embed_tokens.weight" || name == "lm_head.weight") return {0, 1};
  if (ends_with(name, ".attn.c_attn.weight") || ends_with(name, ".attn.c_attn.bias")) return {0, 3};
  for (const char* rows : {".mlp.c_fc.", ".self_attn.q_proj.", ".self_attn.k_proj.", ".self_attn.v_proj.",
                           ".mlp.gate_proj.", ".mlp.up_proj."}) {
    if (name.find(rows) != std::string::npos) return {0, 1};
  }
  for (const char* cols : {".attn.c_proj.weight", ".mlp.c_proj.weight", ".self_attn.o_proj.weight",
                           ".mlp.down_proj.weight"}) {
    if (ends_with(name, cols)) return {1, 1};
  }
  return {};  // norms, position embeddings, row-parallel biases: whole on every rank
}

}  // namespace

ShardSpec GPTImpl::tensor_parallel_spec(const std::string& name) const {
  if (!tp_ || name.rfind("step.", 0) == 0) return {};  // AdamW's step counts are scalars
  for (const char* state : {"exp_avg.", "exp_avg_sq."}) {  // AdamW's moments, cut as their parameter
    const std::string prefix = state;
    if (name.rfind(prefix, 0) == 0) return parameter_spec(name.substr(prefix.size()));
  }
  return parameter_spec(name);
}

int64_t GPTImpl::whole_rows(const std::string& name) const {
  for (const std::string prefix : {"exp_avg.", "exp_avg_sq.", ""}) {
    if (name.rfind(prefix, 0) != 0) continue;
    auto it = whole_rows_.find(name.substr(prefix.size()));
    if (it != whole_rows_.end()) return it->second;
  }
  throw IoError("'" + name + "' is not a tensor-parallel parameter or its optimizer state");
}

void GPTImpl::set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm, bool sequence_parallel) {
  TORCH_CHECK(comm && !tp_, "GPT::set_tensor_parallel: call it once, with a group");
  const int size = comm->size(), rank = comm->rank();
  if (sequence_parallel && cfg_.block_size % size != 0) {
    throw ConfigError("dist.sequence_parallel = true needs model.block_size = " + std::to_string(cfg_.block_size) +
                      " divisible by dist.tensor_parallel = " + std::to_string(size) +
                      "; choose such a block size or set dist.sequence_parallel = false");
  }
  comm->sequence_parallel = sequence_parallel;
  check_tensor_parallel_fits(cfg_, size);
  if (vocab_size_ < size) {
    throw ConfigError("dist.tensor_parallel = " + std::to_string(size) + " exceeds the vocabulary's " +
                      std::to_string(vocab_size_) + " tokens");
  }
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    const ShardSpec spec = parameter_spec(item.key());
    if (!spec.sharded()) continue;
    whole_rows_[item.key()] = item.value().size(spec.dim);
    if (deferred_ && is_placeholder(item.value())) {  // drawn whole and cut when it is filled
      deferred_->cut(item.value(), [spec, rank, size](const torch::Tensor& w) { return shard_of(w, spec, rank, size); });
    } else {
      item.value().set_data(shard_of(item.value().detach(), spec, rank, size));
    }
  }
  vocab_rows_ = piece_range(vocab_size_, rank, size);
  for (auto& layer : layers_) layer->set_tensor_parallel(comm);
  tp_ = std::move(comm);
}

void GPTImpl::sum_sequence_parallel_gradients() {
  std::vector<std::pair<std::string, torch::Tensor>> grads;
  for (auto& item : named_parameters()) {
    if (item.value().grad().defined()) grads.emplace_back(item.key(), item.value().grad());
  }
  sum_sequence_parallel_gradients(grads);
}

void GPTImpl::sum_sequence_parallel_gradients(const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  if (!tp_ || !tp_->sequence_parallel) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;  // one all-reduce for them all: they are small and many
  for (const auto& [name, g] : named) {
    if (g.defined() && !parameter_spec(name).sharded()) grads.push_back(g);
  }
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat;
  for (const auto& g : grads) flat.push_back(g.reshape({-1}));
  torch::Tensor bucket = torch::cat(flat);
  tp_->all_reduce_sum(bucket);
  int64_t offset = 0;
  for (auto& g : grads) {
    g.copy_(bucket.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
}

torch::Tensor GPTImpl::tensor_parallel_forward(const torch::Tensor& x_BTC) {
  torch::NoGradGuard no_grad;  // the whole logits are for evaluation and sampling only
  const torch::Tensor local_BTV = column_parallel(x_BTC, {{head_weight(), {}}}, tp_.get())[0];
  return whole_of(local_BTV, ShardSpec{2, 1}, vocab_size_, *tp_);
}

torch::Tensor GPTImpl::tensor_parallel_loss(const torch::Tensor& x_BTC, const torch::Tensor& targets_BT) {
  const torch::Tensor local_BTV = column_parallel(x_BTC, {{paired_head_weight(), {}}}, tp_.get())[0];
  return vocab_parallel_cross_entropy(local_BTV.reshape({-1, local_BTV.size(-1)}), targets_BT.reshape({-1}),
                                      vocab_rows_, *tp_);
}

}  // namespace hwt
