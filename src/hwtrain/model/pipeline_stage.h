// PipelineStage: what a model that is one stage of a pipeline offers the training loop's pipeline
// schedule (train/pipeline_step.h): its place, its forward on a micro-batch, the shape of the
// activations it passes on, and the group of stages to pass them over (group rank = stage index).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "hwtrain/model/tensor_parallel.h"

namespace hwt {

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  virtual int64_t stage_index() const = 0;
  virtual int64_t stage_count() const = 0;
  bool is_first() const { return stage_index() == 0; }
  bool is_last() const { return stage_index() == stage_count() - 1; }
  // The first stage takes the micro-batch's inputs, the others the previous stage's activations;
  // the last returns the micro-batch's mean loss (a scalar), the others their activations.
  virtual torch::Tensor forward_stage(const torch::Tensor& input, const torch::Tensor& targets) = 0;
  // The activations passed between stages for `rows` rows of `row_elements` tokens (fp32).
  virtual std::vector<int64_t> activation_shape(int64_t rows, int64_t row_elements) const = 0;
  virtual TensorParallelComm& stages() = 0;
};

}  // namespace hwt
