#include "hwtrain/model/tensor_parallel.h"

#include <algorithm>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/model/tied_embedding.h"

namespace hwt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

TensorParallelComm& comm_in(AutogradContext* ctx) { return comm_at(ctx->saved_data["comm"].toInt()); }

// Along the sequence (dim 1), through the leading dimension the group's collectives cut.
torch::Tensor gather_sequence(const torch::Tensor& x_BTC, TensorParallelComm& comm) {
  return whole_sequence(comm.all_gather(sequence_rows(x_BTC))).contiguous();
}

torch::Tensor scatter_sequence(const torch::Tensor& x_BTC, TensorParallelComm& comm) {
  TORCH_CHECK(x_BTC.size(1) % comm.size() == 0, "sequence parallelism: the sequence length ", x_BTC.size(1),
              " does not divide by the ", comm.size(), " tensor-parallel ranks");
  return comm.reduce_scatter(sequence_rows(x_BTC)).transpose(0, 1).contiguous();
}

struct ScatterSequence : public torch::autograd::Function<ScatterSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return scatter_sequence(x, comm_at(comm));
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    return {gather_sequence(grads[0], comm_in(ctx)), torch::Tensor()};
  }
};

struct ReduceFromGroup : public torch::autograd::Function<ReduceFromGroup> {
  static torch::Tensor forward(AutogradContext*, const torch::Tensor& x, int64_t comm) {
    torch::Tensor y = x.contiguous().clone();
    comm_at(comm).all_reduce_sum(y);
    return y;
  }
  static tensor_list backward(AutogradContext*, tensor_list grads) { return {grads[0], torch::Tensor()}; }
};

// Megatron's _VocabParallelCrossEntropy: the log-sum-exp of each row from the ranks' own, the
// target's logit from the rank holding it. Backward: softmax minus the one-hot target, this
// rank's columns, each row weighted by grad / count of counted rows.
struct VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits_NV, const torch::Tensor& targets_N,
                               int64_t start, int64_t address) {
    torch::NoGradGuard no_grad;
    TensorParallelComm& comm = comm_at(address);
    const int64_t V_local = logits_NV.size(1);
    const torch::Tensor lse_N = comm.all_gather(logits_NV.logsumexp(1)).logsumexp(0);
    const torch::Tensor counted_N = targets_N != -1;
    const torch::Tensor mine_N = counted_N & (targets_N >= start) & (targets_N < start + V_local);
    const torch::Tensor local_N = (targets_N - start).clamp(0, std::max<int64_t>(V_local - 1, 0)).masked_fill(~mine_N, 0);
    torch::Tensor target_logit_N =
        logits_NV.gather(1, local_N.unsqueeze(1)).squeeze(1).masked_fill(~mine_N, 0.0).contiguous();
    comm.all_reduce_sum(target_logit_N);
    const torch::Tensor count = counted_N.sum().to(logits_NV.scalar_type());
    const torch::Tensor loss = ((lse_N - target_logit_N) * counted_N).sum() / count;
    ctx->save_for_backward({logits_NV, lse_N, local_N, mine_N, counted_N, count});
    return loss;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &logits_NV = saved[0], &lse_N = saved[1], &local_N = saved[2], &mine_N = saved[3],
                        &counted_N = saved[4], &count = saved[5];
    torch::Tensor g_NV = (logits_NV - lse_N.unsqueeze(1)).exp();
    g_NV.scatter_add_(1, local_N.unsqueeze(1), -mine_N.to(g_NV.scalar_type()).unsqueeze(1));
    g_NV.mul_((counted_N.to(g_NV.scalar_type()) * (grads[0] / count)).unsqueeze(1));
    return {g_NV, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void TensorParallelComm::exchange(const std::vector<Transfer>& transfers) {
  std::vector<std::function<void()>> sends;
  for (const Transfer& t : transfers) {
    if (t.send) sends.push_back(send_async(*t.tensor, t.peer, t.tag));
  }
  for (const Transfer& t : transfers) {
    if (!t.send) recv(*t.tensor, t.peer, t.tag);
  }
  for (auto& wait : sends) wait();
}

int64_t comm_address(TensorParallelComm& comm) { return reinterpret_cast<int64_t>(&comm); }
TensorParallelComm& comm_at(int64_t address) { return *reinterpret_cast<TensorParallelComm*>(address); }

torch::Tensor sequence_rows(const torch::Tensor& x_BTC) { return x_BTC.transpose(0, 1).contiguous(); }
torch::Tensor whole_sequence(const torch::Tensor& all_tTBC) { return all_tTBC.flatten(0, 1).transpose(0, 1); }

void check_tensor_parallel_fits(const ModelConfig& model, int64_t tensor_parallel) {
  struct Cut {
    int64_t value;
    const char* key;
    const char* note;
  };
  for (const Cut& c : {Cut{model.n_head, "model.n_head", ""},
                       Cut{model.kv_heads(), "model.n_kv_head", " (the key/value heads)"},
                       Cut{model.mlp_width(), "the MLP width", " (model.intermediate_size, or 4 x model.n_embd)"}}) {
    if (c.value % tensor_parallel == 0) continue;
    throw ConfigError("dist.tensor_parallel = " + std::to_string(tensor_parallel) + " does not divide " + c.key +
                      " = " + std::to_string(c.value) + c.note + "; valid: " + divisors_text(c.value));
  }
}

torch::Tensor tp_reduce(const torch::Tensor& x, TensorParallelComm& comm) {
  return ReduceFromGroup::apply(x, comm_address(comm));
}

torch::Tensor sp_scatter(const torch::Tensor& x_BTC, TensorParallelComm& comm) {
  return ScatterSequence::apply(x_BTC, comm_address(comm));
}

torch::Tensor row_parallel_linear(torch::nn::Linear& layer, const torch::Tensor& x, TensorParallelComm& comm) {
  torch::Tensor y = tp_exit(torch::linear(x, layer->weight), comm);
  return layer->bias.defined() ? y + layer->bias : y;
}

RowRange piece_range(int64_t n, int rank, int size) {
  const int64_t piece = (n + size - 1) / size;
  return {std::min(n, rank * piece), std::min(n, (rank + 1) * piece)};
}

torch::Tensor shard_of(const torch::Tensor& whole, const ShardSpec& spec, int rank, int size) {
  if (!spec.sharded()) return whole.clone();
  const int64_t block = whole.size(spec.dim) / spec.blocks;
  std::vector<torch::Tensor> parts;
  for (int64_t b = 0; b < spec.blocks; ++b) {
    const RowRange r = piece_range(block, rank, size);
    parts.push_back(whole.narrow(spec.dim, b * block + r.start, r.end - r.start));
  }
  return torch::cat(parts, spec.dim).contiguous();
}

torch::Tensor whole_of(const torch::Tensor& local, const ShardSpec& spec, int64_t whole_rows, TensorParallelComm& comm) {
  if (!spec.sharded()) return local;
  const int size = comm.size();
  const int64_t block = whole_rows / spec.blocks, piece = (block + size - 1) / size;
  // Each rank's blocks padded to `piece` rows, so that every rank sends the same shape.
  const torch::Tensor mine = local.movedim(spec.dim, 0);
  const RowRange own = piece_range(block, comm.rank(), size);
  std::vector<int64_t> padded_shape = mine.sizes().vec();
  padded_shape[0] = piece * spec.blocks;
  torch::Tensor padded = torch::zeros(padded_shape, mine.options());
  const int64_t own_rows = own.end - own.start;
  for (int64_t b = 0; b < spec.blocks; ++b) {
    padded.narrow(0, b * piece, own_rows).copy_(mine.narrow(0, b * own_rows, own_rows));
  }
  const torch::Tensor all = comm.all_gather(padded);  // (size, blocks * piece, ...)
  std::vector<torch::Tensor> rows;
  for (int64_t b = 0; b < spec.blocks; ++b) {
    for (int r = 0; r < size; ++r) {
      const RowRange range = piece_range(block, r, size);
      rows.push_back(all[r].narrow(0, b * piece, range.end - range.start));
    }
  }
  return torch::cat(rows, 0).movedim(0, spec.dim).contiguous();
}

torch::Tensor vocab_parallel_embedding(const torch::Tensor& idx, const torch::Tensor& weight_local, RowRange range,
                                       TensorParallelComm& comm, bool rows_only,
                                       c10::intrusive_ptr<TiedGradientSlot> slot) {
  const torch::Tensor outside = (idx < range.start) | (idx >= range.end);
  const torch::Tensor local = (idx - range.start).masked_fill(outside, 0);
  const torch::Tensor rows =
      rows_only ? tied_embedding_lookup(local, weight_local, std::move(slot)) : torch::embedding(weight_local, local);
  torch::Tensor out = rows.masked_fill(outside.unsqueeze(-1), 0.0);
  return tp_exit(out, comm);
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits_NV, const torch::Tensor& targets_N,
                                           RowRange range, TensorParallelComm& comm) {
  return VocabParallelCrossEntropy::apply(logits_NV.to(torch::kFloat), targets_N, range.start, comm_address(comm));
}

}  // namespace hwt
