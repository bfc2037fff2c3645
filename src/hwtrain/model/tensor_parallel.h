// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) for the built-in decoder: the pieces a
// layer needs to run on its shard of the weights.
// - TensorParallelComm: the tensor-parallel group as the model sees it (dist/tensor_parallel_group.h
//   implements it over a c10d group; the model area does not depend on dist).
// - Megatron's conjugate operators f and g: f, the identity forward that sums the gradients over the
//   group backward, sits in front of the column-parallel layers and is part of their autograd
//   function (model/column_parallel.h, which overlaps it with the weight gradients); tp_reduce (g)
//   sums the partial outputs forward (after a row-parallel layer) and is the identity backward.
// - Sequence parallelism (Korthikanti et al. 2022): between the layers each rank keeps only its
//   slice of the sequence (norms, dropout and the residual stream on T / t positions); the
//   column-parallel layers all-gather their input along T forward and reduce-scatter its gradient
//   backward, and sp_scatter (reduce-scatter forward, all-gather backward) takes the place of
//   tp_reduce. Same math, 1/t of those activations; the column-parallel layers' backward gathers
//   their kept input slice once more (model/column_parallel.h).
// - Vocabulary-parallel embedding and cross-entropy: each rank holds a slice of the vocabulary's
//   rows; the logits stay sliced (each rank's (N, V/t)), the loss comes from the ranks' log-sum-exps
//   and target logits, never from the whole logits.
// - ShardSpec and shard_of / whole_of: how a whole tensor is cut into the ranks' shards and joined
//   back (checkpoints hold whole tensors, so a run resumes on any tensor-parallel size).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "hwtrain/model/linear.h"
#include "hwtrain/model/model_config.h"
#include "hwtrain/model/tied_embedding.h"

namespace hwt {

class TensorParallelComm {
 public:
  virtual ~TensorParallelComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void all_reduce_sum(torch::Tensor& t) = 0;           // in place; blocking
  virtual torch::Tensor all_gather(const torch::Tensor& t) = 0;  // (size, t's shape), rank order; blocking
  // t (size x k rows along dim 0): this rank's k rows of the ranks' sum; blocking.
  virtual torch::Tensor reduce_scatter(const torch::Tensor& t) = 0;
  // Point to point, for pipeline stages (peer: a rank of this group): `t` sent asynchronously (the
  // returned function waits for the send; t must live until then), and received in place, blocking.
  // `tag` keeps apart messages between one pair of ranks that are received in another order than
  // sent (an interleaved pipeline's activations and gradients on two stages); one tag is in order.
  virtual std::function<void()> send_async(const torch::Tensor& t, int peer, int tag) = 0;
  virtual void recv(torch::Tensor& t, int peer, int tag) = 0;
  // `send` to one peer and `recv` from one (maybe the same), issued as one group so that neither
  // waits for the other (NCCL: one coalesced launch, as torch.distributed.batch_isend_irecv; where
  // sends wait for their receives, two neighbours that each send before receiving would wait
  // forever). `recv` is received on return; the returned function waits for the send.
  virtual std::function<void()> send_and_recv(const torch::Tensor& send, int send_peer, int send_tag,
                                              torch::Tensor& recv, int recv_peer, int recv_tag) {
    std::function<void()> wait = send_async(send, send_peer, send_tag);
    this->recv(recv, recv_peer, recv_tag);
    return wait;
  }
  // Sends and receives issued as one group and all finished on return (NCCL: one coalesced launch
  // and its wait, as torch.distributed.batch_isend_irecv in Megatron-LM's batched pipeline p2p):
  // over NCCL the operations between one pair of ranks match in the order each side lists them.
  // Here: every send started, then every receive, then the sends waited for.
  struct Transfer {
    bool send = true;
    torch::Tensor* tensor = nullptr;  // received in place (contiguous)
    int peer = 0, tag = 0;
  };
  virtual void exchange(const std::vector<Transfer>& transfers);
  // Whether a send can wait for its receive in the order the operations were issued (NCCL: each
  // rank's grouped operations in one order on one stream, dist/tensor_parallel_group.cpp). Then two
  // ranks must not each send before receiving what the other sends (GptStage::generate decodes one
  // micro-batch at a time there; run_pipeline_step groups each send with the receive after it).
  virtual bool sends_wait_for_receives() const { return false; }

  // The collectives started and finished later: the returned function waits (once) and gives the
  // result; the tensors must live until then (all_reduce_sum_async: t contiguous, reduced in place).
  // A group whose collectives cannot run in the background runs them here, at once.
  virtual std::function<void()> all_reduce_sum_async(torch::Tensor& t) {
    TORCH_CHECK(t.is_contiguous(), "all_reduce_sum_async needs a contiguous tensor");
    all_reduce_sum(t);
    return [] {};
  }
  virtual std::function<torch::Tensor()> all_gather_async(const torch::Tensor& t) {
    torch::Tensor all = all_gather(t);
    return [all] { return all; };
  }
  virtual std::function<torch::Tensor()> reduce_scatter_async(const torch::Tensor& t) {
    torch::Tensor mine = reduce_scatter(t);
    return [mine] { return mine; };
  }

  // Whether the layers using this group keep activations cut along the sequence between them
  // (sequence parallelism); set once by GPT::set_tensor_parallel.
  bool sequence_parallel = false;
};

// For the tensor-parallel layers' autograd functions (here and model/column_parallel.cpp): the group
// travels through an autograd context as an address (it outlives every graph built with it: the
// model holds it), and the sequence goes through the group's collectives as their leading dimension.
int64_t comm_address(TensorParallelComm& comm);
TensorParallelComm& comm_at(int64_t address);
// x (B, T, C) -> (T, B, C), contiguous: the rows the collectives cut.
torch::Tensor sequence_rows(const torch::Tensor& x_BTC);
// The ranks' gathered rows (t, T / t, B, C) -> (B, T, C), a view.
torch::Tensor whole_sequence(const torch::Tensor& all_tTBC);

// ConfigError, one line naming dist.tensor_parallel and the valid values, unless `tensor_parallel`
// divides model.n_head, the key/value heads and the MLP width.
void check_tensor_parallel_fits(const ModelConfig& model, int64_t tensor_parallel);

torch::Tensor tp_reduce(const torch::Tensor& x, TensorParallelComm& comm);
// x (B, T, C) -> (B, T / t, C), the ranks' sum cut along the sequence (all-gather backward); T must
// divide by the group's size.
torch::Tensor sp_scatter(const torch::Tensor& x_BTC, TensorParallelComm& comm);
// The ranks' partial outputs summed (tp_reduce), or summed and cut along the sequence (sp_scatter).
inline torch::Tensor tp_exit(const torch::Tensor& x, TensorParallelComm& comm) {
  return comm.sequence_parallel ? sp_scatter(x, comm) : tp_reduce(x, comm);
}
// A row-parallel linear layer (its weight cut along the input dimension): the ranks' partial
// products summed (tp_exit), then the bias, which every rank holds whole and adds once.
torch::Tensor row_parallel_linear(torch::nn::Linear& layer, const torch::Tensor& x, TensorParallelComm& comm);
// A block's output layer: row_parallel_linear under a group, linear(layer, x) without (the pair of
// column_parallel, model/column_parallel.h).
inline torch::Tensor tp_output_linear(torch::nn::Linear& layer, const torch::Tensor& x, TensorParallelComm* comm) {
  return comm ? row_parallel_linear(layer, x, *comm) : linear(layer, x);
}

// How a tensor is cut over the ranks: along `dim` (-1: every rank holds it whole, "replicated"),
// as `blocks` equal consecutive blocks (GPT-2's fused c_attn rows are q | k | v: 3), each block
// split into `size` contiguous pieces of ceil(block / size) rows, the last ones shorter where the
// block does not divide (a vocabulary of 50257 rows). Rank r holds piece r of every block.
struct ShardSpec {
  int64_t dim = -1;
  int64_t blocks = 1;
  bool sharded() const { return dim >= 0; }
};

// Rank `rank`'s rows [start, end) of piece-split `n`: the vocabulary slice of a rank.
struct RowRange {
  int64_t start = 0, end = 0;
};
RowRange piece_range(int64_t n, int rank, int size);

// This rank's shard of `whole` (a view-free copy), and the whole tensor back from every rank's
// shard (`whole_rows`: the whole tensor's length along spec.dim; collective over `comm`).
torch::Tensor shard_of(const torch::Tensor& whole, const ShardSpec& spec, int rank, int size);
torch::Tensor whole_of(const torch::Tensor& local, const ShardSpec& spec, int64_t whole_rows, TensorParallelComm& comm);

// idx (B, T) looked up in this rank's rows `range` of the embedding (`weight_local`), the other
// ranks' rows summed in (tp_exit): the whole embedding's output on every rank, or this rank's
// slice of the sequence under sequence parallelism. `rows_only`: the weight's gradient as
// tied_embedding_lookup gives it (model/tied_embedding.h), for a tied head in the same graph, paired
// with that head through `slot` if given (the rows added into the head's gradient in place).
torch::Tensor vocab_parallel_embedding(const torch::Tensor& idx, const torch::Tensor& weight_local, RowRange range,
                                       TensorParallelComm& comm, bool rows_only = false,
                                       c10::intrusive_ptr<TiedGradientSlot> slot = {});
// Mean cross-entropy (fp32) over targets != -1 of logits sliced by vocabulary: logits_NV holds this
// rank's columns `range` of each row's logits. Equal to cross_entropy of the whole logits.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits_NV, const torch::Tensor& targets_N,
                                           RowRange range, TensorParallelComm& comm);

}  // namespace hwt
