// ExampleSource: a user's own data as a map-style dataset (PyTorch's Dataset: a size and an
// indexed get), beside the built-in sharded token datasets. Example i is one row of a batch: an
// input tensor and a target tensor, each of the same shape and dtype for every i (they are
// stacked into [N, ...] batches). The loader calls get() from its worker threads, so get() must be
// safe to call concurrently (a const read of memory or files is). TensorExamples wraps two
// tensors whose first dimension indexes the examples.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace hwt {

struct Example {
  torch::Tensor input;
  torch::Tensor target;
};

class ExampleSource {
 public:
  virtual ~ExampleSource() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;  // index in [0, size())
  // Names the source in errors ("validation examples").
  virtual std::string name() const { return "examples"; }
  // What one example counts as in tokens_seen, tokens/s and the model's FLOPs per row: 1 (a
  // sample) unless the examples are sequences (then their length).
  virtual int64_t tokens_per_example() const { return 1; }
};

// Rows of `inputs` and `targets` (same first dimension, CPU or not: rows are copied to the CPU).
class TensorExamples : public ExampleSource {
 public:
  // ConfigError when the first dimensions differ or are zero.
  TensorExamples(torch::Tensor inputs, torch::Tensor targets, std::string name = "examples");
  int64_t size() const override { return inputs_.size(0); }
  Example get(int64_t index) const override { return {inputs_[index], targets_[index]}; }
  std::string name() const override { return name_; }

 private:
  torch::Tensor inputs_, targets_;
  std::string name_;
};

}  // namespace hwt
