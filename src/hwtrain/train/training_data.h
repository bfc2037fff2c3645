// TrainingData: where a Trainer's rows come from, so that it trains on the built-in sharded token
// datasets and on a user's own examples alike.
//   TokenWindows: windows of block_size + 1 tokens of a ShardedDataset (the built-in path): the
//                 training split through DatasetSampler, fixed validation windows, the dataset's
//                 tokenizer for checkpoints; "tokens" are tokens.
//   ExampleData:  a user's map-style ExampleSource for training and, optionally, another for
//                 validation (evaluated whole, in micro-batches, the mean weighted by rows);
//                 shuffled (or in order) per epoch; a row counts tokens_per_example() tokens.
// The identity (tokenizer name, vocabulary, fingerprint) goes into checkpoints and is compared
// when resuming.
#pragma once
#include <memory>
#include <string>

#include "hwtrain/data/batch_loader.h"
#include "hwtrain/data/example_source.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/tokenizer.h"
#include "hwtrain/data/window_sampler.h"

namespace hwt {

struct DataIdentity {
  std::string tokenizer;  // "byte", "sp:...", or "none" for examples
  int64_t vocab_size = 0;  // 0 for examples
  uint64_t fingerprint = 0;
};

class TrainingData {
 public:
  virtual ~TrainingData() = default;
  // The training stream of one rank (options.block_size is set by the data for windows).
  virtual std::unique_ptr<BatchLoader> train_loader(LoaderOptions options) const = 0;
  virtual bool has_validation() const = 0;
  // How many validation batches of `rows` rows an evaluation runs: train.eval_batches windows, or
  // the whole of a user's validation examples.
  virtual int64_t validation_batches(int64_t rows, int64_t eval_batches) const = 0;
  // Validation batch number `index` of (at most) `rows` rows: the same batches at every evaluation.
  virtual Batch validation_batch(int64_t index, int64_t rows) const = 0;
  // `rows` rows of the right shapes for the batch-size probe (their values do not matter).
  virtual Batch probe_batch(int64_t rows, uint64_t seed) const = 0;
  // What a row counts as in tokens_seen and tokens/s: T for windows, 1 for examples.
  virtual int64_t tokens_per_row() const = 0;
  virtual DataIdentity identity() const = 0;
  // The tokenizer checkpoints carry (`spec` as data.tokenizer), or null.
  virtual std::unique_ptr<Tokenizer> tokenizer(const std::string& spec) const { return nullptr; }
};

class TokenWindows : public TrainingData {
 public:
  TokenWindows(std::shared_ptr<const ShardedDataset> data, int64_t block_size, uint64_t val_seed);
  std::unique_ptr<BatchLoader> train_loader(LoaderOptions options) const override;
  bool has_validation() const override { return true; }
  int64_t validation_batches(int64_t, int64_t eval_batches) const override { return eval_batches; }
  Batch validation_batch(int64_t index, int64_t rows) const override { return val_.batch_at(index, rows); }
  Batch probe_batch(int64_t rows, uint64_t seed) const override;
  int64_t tokens_per_row() const override { return block_size_; }
  DataIdentity identity() const override;
  std::unique_ptr<Tokenizer> tokenizer(const std::string& spec) const override;

 private:
  std::shared_ptr<const ShardedDataset> data_;
  int64_t block_size_;
  WindowSampler val_;
};

class ExampleData : public TrainingData {
 public:
  // validation may be null (then the trainer skips evaluations).
  ExampleData(std::shared_ptr<const ExampleSource> train, std::shared_ptr<const ExampleSource> validation = nullptr);
  std::unique_ptr<BatchLoader> train_loader(LoaderOptions options) const override;
  bool has_validation() const override { return validation_ != nullptr; }
  int64_t validation_batches(int64_t rows, int64_t) const override { return (validation_->size() + rows - 1) / rows; }
  Batch validation_batch(int64_t index, int64_t rows) const override;
  Batch probe_batch(int64_t rows, uint64_t seed) const override;
  int64_t tokens_per_row() const override { return train_->tokens_per_example(); }
  DataIdentity identity() const override;

 private:
  std::shared_ptr<const ExampleSource> train_, validation_;
};

}  // namespace hwt
