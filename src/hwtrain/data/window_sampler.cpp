#include "hwtrain/data/window_sampler.h"

#include "hwtrain/core/error.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/sharded_dataset.h"

namespace hwt {

namespace {

void ensure_batch_tensor(torch::Tensor& t, int64_t batch_size, int64_t block_size) {
  bool fits = t.defined() && t.scalar_type() == torch::kLong && t.device().is_cpu() && t.dim() == 2 &&
              t.size(0) == batch_size && t.size(1) == block_size && t.is_contiguous();
  if (!fits) t = torch::empty({batch_size, block_size}, torch::kLong);
}

}  // namespace

WindowSampler::WindowSampler(TokenSequence tokens, int64_t block_size, uint64_t seed, std::string what, std::string hint)
    : tokens_(std::move(tokens)), block_size_(block_size), seed_(seed) {
  if (block_size < 1) {
    throw ConfigError("model.block_size = " + std::to_string(block_size) + " is out of range; valid: >= 1");
  }
  if (tokens_.size() < block_size + 1) {
    throw DataError(what + " has " + std::to_string(tokens_.size()) + " tokens, fewer than model.block_size+1 = " +
                    std::to_string(block_size + 1) + "; " + hint);
  }
}

WindowSampler::WindowSampler(const TokenFile& file, Split split, int64_t block_size, uint64_t seed)
    : WindowSampler(file.split(split), block_size, seed, std::string(split_name(split)) + " split of " + file.path().string(),
                    split == Split::kVal ? "lower model.block_size, or hold out more: data.val_fraction when training "
                                           "on text (hwtrain prepares it), hwtrain prepare --val-fraction when this "
                                           "file is one you prepared (its split is fixed)"
                                         : "lower model.block_size or use a larger corpus") {}

WindowSampler::WindowSampler(const ShardedDataset& dataset, Split split, int64_t block_size, uint64_t seed)
    : WindowSampler(dataset.split(split), block_size, seed,
                    std::string(split_name(split)) + " split of " + dataset.path().string(),
                    split == Split::kVal ? "lower model.block_size, or prepare the dataset again with a larger "
                                           "--val-fraction (its split is fixed: data.val_fraction applies to text)"
                                         : "lower model.block_size or use a larger corpus") {}

int64_t WindowSampler::window_offset(int64_t draw) const {
  uint64_t h = counter_hash(seed_, static_cast<uint64_t>(draw));
  // Lemire's multiply-shift: uniform in [0, n) without a division.
  auto n = static_cast<unsigned __int128>(num_start_offsets());
  return static_cast<int64_t>((static_cast<unsigned __int128>(h) * n) >> 64);
}

void WindowSampler::fill(int64_t first_draw, int64_t batch_size, torch::Tensor& x_BT, torch::Tensor& y_BT) const {
  if (batch_size < 1) throw ConfigError("batch size " + std::to_string(batch_size) + " is out of range; valid: >= 1");
  ensure_batch_tensor(x_BT, batch_size, block_size_);
  ensure_batch_tensor(y_BT, batch_size, block_size_);
  int64_t* x = x_BT.data_ptr<int64_t>();
  int64_t* y = y_BT.data_ptr<int64_t>();
  const int64_t T = block_size_;
  for (int64_t b = 0; b < batch_size; ++b) {
    int64_t offset = window_offset(first_draw + b);
    tokens_.copy_window(offset, T, x + b * T);
    tokens_.copy_window(offset + 1, T, y + b * T);
  }
}

void WindowSampler::next_batch(int64_t batch_size, torch::Tensor& x_BT, torch::Tensor& y_BT) {
  fill(position_, batch_size, x_BT, y_BT);
  position_ += batch_size;
}

Batch WindowSampler::next_batch(int64_t batch_size) {
  Batch b;
  next_batch(batch_size, b.x_BT, b.y_BT);
  return b;
}

void WindowSampler::batch_at(int64_t batch_index, int64_t batch_size, torch::Tensor& x_BT, torch::Tensor& y_BT) const {
  if (batch_index < 0) throw std::out_of_range("batch index " + std::to_string(batch_index) + " is negative");
  fill(batch_index * batch_size, batch_size, x_BT, y_BT);
}

Batch WindowSampler::batch_at(int64_t batch_index, int64_t batch_size) const {
  Batch b;
  batch_at(batch_index, batch_size, b.x_BT, b.y_BT);
  return b;
}

void WindowSampler::set_position(int64_t position) {
  if (position < 0) {
    throw DataError("data sampler position " + std::to_string(position) + " is negative (corrupt training state?)");
  }
  position_ = position;
}

}  // namespace hwt
