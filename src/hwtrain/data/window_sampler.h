// WindowSampler: random windows of block_size + 1 tokens from a TokenSequence (a token file's split,
// or the shards of a sharded dataset's split), as (x, y) batches for
// next-token prediction. The generator is counter-based (splitmix64 of (seed, draw index)), so
// the whole sampler state is position() = the number of windows drawn: a checkpoint stores it and
// set_position() resumes the exact stream. batch_at() gives fixed batches for evaluation that do
// not depend on (or move) the position.
// Shape letters: B = batch size, T = block_size.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "hwtrain/data/token_file.h"
#include "hwtrain/data/token_sequence.h"

namespace hwt {

class ShardedDataset;

struct Batch {
  torch::Tensor x_BT;  // int64 token ids
  torch::Tensor y_BT;  // x shifted left by one: the next token at every position
};

class WindowSampler {
 public:
  // `what` names the tokens in errors ("validation split of data/x.hwt"), `hint` says what to
  // change. DataError when the span has fewer than block_size + 1 tokens.
  WindowSampler(TokenSequence tokens, int64_t block_size, uint64_t seed, std::string what = "token span",
                std::string hint = "lower model.block_size");
  // A sampler over one split of `file`, with the matching message and hint.
  WindowSampler(const TokenFile& file, Split split, int64_t block_size, uint64_t seed);
  // A sampler over one split of a dataset (all its shards), with the matching message and hint.
  WindowSampler(const ShardedDataset& dataset, Split split, int64_t block_size, uint64_t seed);

  // Fills x_BT, y_BT (CPU int64, [batch_size, block_size]) with the next batch_size windows and
  // advances position() by batch_size. The tensors are reused when they already have that shape,
  // dtype and device (CPU) and are contiguous, else replaced: keep no views of a previous batch.
  void next_batch(int64_t batch_size, torch::Tensor& x_BT, torch::Tensor& y_BT);
  Batch next_batch(int64_t batch_size);

  // Batch number `batch_index` of windows drawn from position 0 (draws batch_index * batch_size
  // onward), whatever position() is: the k-th fixed evaluation batch. Does not move position().
  void batch_at(int64_t batch_index, int64_t batch_size, torch::Tensor& x_BT, torch::Tensor& y_BT) const;
  Batch batch_at(int64_t batch_index, int64_t batch_size) const;

  // Token offset of window number `draw`, in [0, num_start_offsets()).
  int64_t window_offset(int64_t draw) const;

  int64_t position() const { return position_; }
  void set_position(int64_t position);
  int64_t block_size() const { return block_size_; }
  uint64_t seed() const { return seed_; }
  int64_t num_start_offsets() const { return tokens_.size() - block_size_; }
  const TokenSequence& tokens() const { return tokens_; }

 private:
  void fill(int64_t first_draw, int64_t batch_size, torch::Tensor& x_BT, torch::Tensor& y_BT) const;

  TokenSequence tokens_;
  int64_t block_size_;
  uint64_t seed_;
  int64_t position_ = 0;
};

}  // namespace hwt
