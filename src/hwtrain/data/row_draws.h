// RowDraws: what the d-th draw of a run is, for the BatchLoader. A draw is one row of a batch:
//   WindowDraws:  a window of block_size + 1 tokens (DatasetSampler picks its offset); x is its
//                 first block_size tokens, y the same shifted by one.
//   ExampleDraws: an example of a user's ExampleSource; x its input, y its target. Epoch e visits
//                 every example once: in a seeded permutation of its own (random), or in index
//                 order (sequential), as PyTorch's RandomSampler / SequentialSampler do.
// Both are pure functions of (seed, d), so any loader thread can assemble any step and a run's
// whole position is the number of draws. The rows of a step are distinct while the step stays
// within one epoch (windows: always, see DatasetSampler::group_offsets).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "hwtrain/data/data_config.h"
#include "hwtrain/data/dataset_sampler.h"
#include "hwtrain/data/example_source.h"

namespace hwt {

struct Rows {
  torch::Tensor x, y;  // [rows, ...] on the CPU (page-locked when asked for)
};

class RowDraws {
 public:
  virtual ~RowDraws() = default;
  virtual int64_t draws_per_epoch() const = 0;
  virtual uint64_t seed() const = 0;
  // The same draws under another seed (a resumed run's).
  virtual std::shared_ptr<const RowDraws> reseeded(uint64_t seed) const = 0;
  // Rows [first_row, first_row + rows) of the group of `group` draws that starts at first_draw.
  virtual Rows assemble(int64_t first_draw, int64_t group, int64_t first_row, int64_t rows, bool pinned) const = 0;
};

class WindowDraws : public RowDraws {
 public:
  WindowDraws(std::shared_ptr<const DatasetSampler> sampler, std::string what)
      : sampler_(std::move(sampler)), what_(std::move(what)) {}
  int64_t draws_per_epoch() const override { return sampler_->windows_per_epoch(); }
  uint64_t seed() const override { return sampler_->seed(); }
  std::shared_ptr<const RowDraws> reseeded(uint64_t seed) const override;
  Rows assemble(int64_t first_draw, int64_t group, int64_t first_row, int64_t rows, bool pinned) const override;
  const DatasetSampler& sampler() const { return *sampler_; }

 private:
  std::shared_ptr<const DatasetSampler> sampler_;
  std::string what_;  // names the tokens in errors
};

class ExampleDraws : public RowDraws {
 public:
  // ConfigError when the source is empty.
  ExampleDraws(std::shared_ptr<const ExampleSource> source, uint64_t seed, SamplingMode mode);
  int64_t draws_per_epoch() const override { return source_->size(); }
  uint64_t seed() const override { return seed_; }
  std::shared_ptr<const RowDraws> reseeded(uint64_t seed) const override;
  Rows assemble(int64_t first_draw, int64_t group, int64_t first_row, int64_t rows, bool pinned) const override;
  // The example that draw `draw` reads.
  int64_t example_index(int64_t draw) const;

 private:
  std::shared_ptr<const ExampleSource> source_;
  uint64_t seed_;
  SamplingMode mode_;
};

// Stacks rows [first, first + count) of `source` as one batch (evaluation batches, probes);
// DataError naming the source and index when an example's shape or dtype differs from the first's.
Rows stack_examples(const ExampleSource& source, int64_t first, int64_t count);

}  // namespace hwt
