// The decoding loop that GPT::generate and a pipeline stage's generate (GptStage::generate) share:
// the arguments checked, the positions each step runs (with a KV cache the new token alone, the
// window again only when it slides past block_size; without, the whole window every token), the
// tokens appended; and the sampler (temperature, top-k, top-p) and the guards generate runs under.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "hwtrain/model/kv_cache.h"
#include "hwtrain/model/tensor_parallel.h"

namespace hwt {

struct DecodeOptions {
  int64_t max_new_tokens = 0;
  int64_t block_size = 0;  // the model's context
  int64_t n_layer = 0;     // the cache's layers
  bool use_cache = true;
  // The batch's rows decoded as this many micro-batches, each with its own cache, step by step in
  // turn (micro_batch_rows): what a pipeline decodes in flight (GptStage::generate). One process
  // draws the same tokens with the same split, since each micro-batch's draw comes in the same order.
  int64_t micro_batches = 1;
};

// The rows [first, first + count) of each of `micro_batches` micro-batches of `rows` rows: as even as
// can be, the first rows % micro_batches one row longer; never more micro-batches than rows.
std::vector<std::pair<int64_t, int64_t>> micro_batch_rows(int64_t rows, int64_t micro_batches);

// What one micro-batch runs at its next step: its new positions (the window again, from position 0,
// after `restart` clears the cache), or the last token alone on its cache.
struct DecodeStep {
  torch::Tensor ids_BT;
  bool restart = false;
};
DecodeStep next_decode_step(const torch::Tensor& idx_BT, const KVCache* cache, const DecodeOptions& options);

// The next token (B, 1) after `ids_BT`: with `cache` (holding the positions before ids_BT, which
// it must append), or without (null: ids_BT is the whole window).
using NextToken = std::function<torch::Tensor(const torch::Tensor& ids_BT, KVCache* cache)>;

// Throws c10::Error naming the argument (as GPT::generate did) for an empty prompt, a negative
// token count or temperature, top_p outside (0, 1], or fewer than one micro-batch.
void check_decode_arguments(const torch::Tensor& idx_BT, int64_t max_new_tokens, double temperature, double top_p,
                            int64_t micro_batches = 1);

// idx_BT with options.max_new_tokens tokens appended, each from `next` (per micro-batch, in turn).
torch::Tensor decode_tokens(torch::Tensor idx_BT, const DecodeOptions& options, const NextToken& next);

// The next token (B, 1) from the last position's logits (B, V): argmax at temperature 0, else
// drawn after top-k and top-p (the nucleus: the most likely tokens until their mass reaches top_p).
// A CPU generator samples on the CPU (B x V probabilities): the same draws on every device.
torch::Tensor sample_next(torch::Tensor logits_BV, double temperature, int64_t top_k, double top_p,
                          const std::optional<at::Generator>& gen);

// Puts a module back into the training mode it had, however the scope is left.
class TrainingModeGuard {
 public:
  explicit TrainingModeGuard(torch::nn::Module& module) : module_(module), was_training_(module.is_training()) {}
  ~TrainingModeGuard() { module_.train(was_training_); }
  TrainingModeGuard(const TrainingModeGuard&) = delete;
  TrainingModeGuard& operator=(const TrainingModeGuard&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

// Turns a tensor-parallel model's sequence parallelism off for a scope (decoding keeps the whole
// sequence, of any length, on every rank) and back on after.
class WholeSequenceGuard {
 public:
  explicit WholeSequenceGuard(TensorParallelComm* comm) : comm_(comm), was_(comm && comm->sequence_parallel) {
    if (comm_) comm_->sequence_parallel = false;
  }
  ~WholeSequenceGuard() {
    if (comm_) comm_->sequence_parallel = was_;
  }
  WholeSequenceGuard(const WholeSequenceGuard&) = delete;
  WholeSequenceGuard& operator=(const WholeSequenceGuard&) = delete;

 private:
  TensorParallelComm* comm_;
  bool was_;
};

}  // namespace hwt
