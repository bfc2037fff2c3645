#include "hwtrain/model/gpt_model.h"

#include "hwtrain/core/error.h"

namespace hwt {

double training_flops_per_token(const ModelConfig& m, int64_t num_params) {
  return 6.0 * static_cast<double>(num_params) +
         12.0 * static_cast<double>(m.n_layer * m.n_embd * m.block_size);
}

// Under tensor parallelism: this rank's share of the whole model's FLOPs (the MFU divides by one device).
double GptModel::training_flops_per_row(int64_t row_elements) {
  TensorParallelComm* tp = gpt_->tensor_parallel();
  if (!tp) return training_flops_per_token(gpt_->config(), gpt_->num_parameters(false)) * static_cast<double>(row_elements);
  const int64_t whole = GPTImpl::count_parameters(gpt_->config(), gpt_->vocab_size(), /*exclude_position_embedding=*/false);
  return training_flops_per_token(gpt_->config(), whole) * static_cast<double>(row_elements) / tp->size();
}

NamedParameters tensor_parallel_whole(GPTImpl& gpt, NamedParameters local) {
  TensorParallelComm* tp = gpt.tensor_parallel();
  if (!tp) return local;
  for (auto& [name, t] : local) {
    const ShardSpec spec = gpt.tensor_parallel_spec(name);
    if (spec.sharded() && t.dim() > spec.dim) t = whole_of(t, spec, gpt.whole_rows(name), *tp);
  }
  return local;
}

NamedParameters tensor_parallel_local(const GPTImpl& gpt, NamedParameters whole) {
  TensorParallelComm* tp = gpt.tensor_parallel();
  if (!tp) return whole;
  for (auto& [name, t] : whole) {
    const ShardSpec spec = gpt.tensor_parallel_spec(name);
    if (!spec.sharded() || t.dim() <= spec.dim) continue;
    if (t.size(spec.dim) != gpt.whole_rows(name)) {
      throw IoError("'" + name + "' has " + std::to_string(t.size(spec.dim)) + " rows along dimension " +
                    std::to_string(spec.dim) + ", the model's whole tensor " + std::to_string(gpt.whole_rows(name)));
    }
    t = shard_of(t, spec, tp->rank(), tp->size());
  }
  return whole;
}

torch::Tensor tensor_parallel_norm_share(GPTImpl& gpt, const torch::Tensor& local_squared, const NamedParameters& grads) {
  TensorParallelComm* tp = gpt.tensor_parallel();
  if (!tp) return local_squared;
  torch::NoGradGuard no_grad;
  torch::Tensor replicated = torch::zeros({}, local_squared.options());
  for (const auto& [name, g] : grads) {
    if (g.defined() && !gpt.tensor_parallel_spec(name).sharded()) {
      replicated = replicated + g.to(local_squared.scalar_type()).pow(2).sum();
    }
  }
  return local_squared - replicated * (1.0 - 1.0 / tp->size());
}

}  // namespace hwt
