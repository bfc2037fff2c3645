#include "hwtrain/train/training_data.h"

#include <ATen/CPUGeneratorImpl.h>

#include "hwtrain/core/error.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/row_draws.h"

namespace hwt {

TokenWindows::TokenWindows(std::shared_ptr<const ShardedDataset> data, int64_t block_size, uint64_t val_seed)
    : data_(std::move(data)), block_size_(block_size), val_(*data_, Split::kVal, block_size, val_seed) {}

std::unique_ptr<BatchLoader> TokenWindows::train_loader(LoaderOptions options) const {
  options.block_size = block_size_;
  return std::make_unique<BatchLoader>(data_->train(), options, "training split of " + data_->path().string());
}

// Random tokens: memory does not depend on the values, and the training stream stays untouched.
Batch TokenWindows::probe_batch(int64_t rows, uint64_t seed) const {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Batch b;
  b.x_BT = torch::randint(data_->vocab_size(), {rows, block_size_}, gen, torch::kInt64);
  b.y_BT = torch::randint(data_->vocab_size(), {rows, block_size_}, gen, torch::kInt64);
  return b;
}

DataIdentity TokenWindows::identity() const {
  return {data_->tokenizer_name(), data_->vocab_size(), data_->fingerprint()};
}

std::unique_ptr<Tokenizer> TokenWindows::tokenizer(const std::string& spec) const {
  return dataset_tokenizer(*data_, spec);
}

ExampleData::ExampleData(std::shared_ptr<const ExampleSource> train, std::shared_ptr<const ExampleSource> validation)
    : train_(std::move(train)), validation_(std::move(validation)) {
  if (!train_ || train_->size() <= 0) throw ConfigError("the training examples are empty; valid: at least one example");
  if (validation_ && validation_->size() <= 0) {
    throw ConfigError(validation_->name() + " is empty; pass no validation source to train without evaluations");
  }
}

// A step's rows are distinct within an epoch only: a global batch above the examples would repeat some.
std::unique_ptr<BatchLoader> ExampleData::train_loader(LoaderOptions options) const {
  const int64_t global = options.batch_size * options.world_size;
  if (global > train_->size()) {
    throw ConfigError(train_->name() + " holds " + std::to_string(train_->size()) + " examples, fewer than the " +
                      std::to_string(global) + " rows of one step; use a smaller batch size or more examples");
  }
  return std::make_unique<BatchLoader>(std::make_shared<ExampleDraws>(train_, options.seed, options.sampling), options,
                                       train_->name());
}

Batch ExampleData::validation_batch(int64_t index, int64_t rows) const {
  const int64_t first = index * rows;
  Rows r = stack_examples(*validation_, first, std::min(rows, validation_->size() - first));
  return {r.x, r.y};
}

// The first rows of the training examples: their shapes are what the probe measures.
Batch ExampleData::probe_batch(int64_t rows, uint64_t /*seed*/) const {
  Rows r = stack_examples(*train_, 0, rows);
  return {r.x, r.y};
}

// Examples have no tokenizer; the fingerprint is their count and row shapes, which a resume on
// other data would most likely change.
DataIdentity ExampleData::identity() const {
  const Example first = train_->get(0);
  uint64_t h = counter_hash(static_cast<uint64_t>(train_->size()), 0);
  for (const int64_t d : first.input.sizes()) h = counter_hash(h, static_cast<uint64_t>(d));
  for (const int64_t d : first.target.sizes()) h = counter_hash(h, static_cast<uint64_t>(d) + 1000003);
  return {"none", 0, h};
}

}  // namespace hwt
