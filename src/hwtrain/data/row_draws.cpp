#include "hwtrain/data/row_draws.h"

#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/data/corpus.h"

namespace hwt {

namespace {

// Stacks examples and checks that each has the first one's shape and dtype.
Rows stack_checked(const ExampleSource& source, const std::vector<int64_t>& indices, bool pinned) {
  std::vector<torch::Tensor> xs, ys;
  xs.reserve(indices.size());
  ys.reserve(indices.size());
  for (const int64_t i : indices) {
    Example e = source.get(i);
    if (!e.input.defined() || !e.target.defined()) {
      throw DataError(source.name() + ": example " + std::to_string(i) + " has an undefined input or target");
    }
    if (!xs.empty() && (e.input.sizes() != xs[0].sizes() || e.input.scalar_type() != xs[0].scalar_type() ||
                        e.target.sizes() != ys[0].sizes() || e.target.scalar_type() != ys[0].scalar_type())) {
      throw DataError(source.name() + ": example " + std::to_string(i) + " has input " +
                      c10::str(e.input.sizes(), " ", e.input.scalar_type()) + " and target " +
                      c10::str(e.target.sizes(), " ", e.target.scalar_type()) + ", example " +
                      std::to_string(indices[0]) + " " + c10::str(xs[0].sizes(), " ", xs[0].scalar_type()) + " and " +
                      c10::str(ys[0].sizes(), " ", ys[0].scalar_type()) +
                      "; every example of a source must have the same shapes and dtypes");
    }
    xs.push_back(e.input.to(torch::kCPU));
    ys.push_back(e.target.to(torch::kCPU));
  }
  Rows r{torch::stack(xs), torch::stack(ys)};
  if (pinned) {
    r.x = r.x.pin_memory();
    r.y = r.y.pin_memory();
  }
  return r;
}

}  // namespace

std::shared_ptr<const RowDraws> WindowDraws::reseeded(uint64_t seed) const {
  const DatasetSampler& s = *sampler_;
  return std::make_shared<WindowDraws>(
      std::make_shared<const DatasetSampler>(s.tokens(), s.block_size(), seed, s.mode(), what_), what_);
}

Rows WindowDraws::assemble(int64_t first_draw, int64_t group, int64_t first_row, int64_t rows, bool pinned) const {
  const int64_t T = sampler_->block_size();
  std::vector<int64_t> offsets(static_cast<size_t>(group));
  sampler_->group_offsets(first_draw, group, offsets.data());
  auto opts = torch::TensorOptions().dtype(torch::kLong).pinned_memory(pinned);
  Rows b{torch::empty({rows, T}, opts), torch::empty({rows, T}, opts)};
  int64_t* x = b.x.data_ptr<int64_t>();
  int64_t* y = b.y.data_ptr<int64_t>();
  const TokenSequence& tokens = sampler_->tokens();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t offset = offsets[static_cast<size_t>(first_row + r)];
    tokens.copy_window(offset, T, x + r * T);
    tokens.copy_window(offset + 1, T, y + r * T);
  }
  return b;
}

ExampleDraws::ExampleDraws(std::shared_ptr<const ExampleSource> source, uint64_t seed, SamplingMode mode)
    : source_(std::move(source)), seed_(seed), mode_(mode) {
  if (!source_ || source_->size() <= 0) {
    throw ConfigError((source_ ? source_->name() : std::string("training examples")) +
                      " is empty; valid: at least one example");
  }
}

std::shared_ptr<const RowDraws> ExampleDraws::reseeded(uint64_t seed) const {
  return std::make_shared<ExampleDraws>(source_, seed, mode_);
}

int64_t ExampleDraws::example_index(int64_t draw) const {
  const int64_t n = source_->size();
  const int64_t epoch = draw / n, i = draw % n;
  if (mode_ == SamplingMode::kSequential) return i;
  const IndexPermutation perm(static_cast<uint64_t>(n), counter_hash(seed_, static_cast<uint64_t>(epoch)));
  return static_cast<int64_t>(perm(static_cast<uint64_t>(i)));
}

Rows ExampleDraws::assemble(int64_t first_draw, int64_t /*group*/, int64_t first_row, int64_t rows, bool pinned) const {
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) indices.push_back(example_index(first_draw + first_row + r));
  return stack_checked(*source_, indices, pinned);
}

Rows stack_examples(const ExampleSource& source, int64_t first, int64_t count) {
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < count; ++i) indices.push_back((first + i) % source.size());
  return stack_checked(source, indices, false);
}

}  // namespace hwt
