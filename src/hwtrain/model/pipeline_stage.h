// PipelineStage: what a model that is one stage of a pipeline offers the training loop's pipeline
// schedule (train/pipeline_step.h): its place, its forward on a micro-batch, the shape of the
// activations it passes on, and the group of stages to pass them over (group rank = stage index).
// A stage may hold several model chunks (interleaved 1F1B: Narayanan et al. 2021, section 2.2):
// with p stages of v chunks, chunk c of stage s is virtual stage c p + s of the p v the decoder is
// cut into, so the activations go round the stages v times; the first stage's chunk 0 takes the
// tokens and the last stage's chunk v - 1 computes the loss.
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
  virtual int64_t chunk_count() const { return 1; }
  bool is_first() const { return stage_index() == 0; }  // holds the embeddings
  bool is_last() const { return stage_index() == stage_count() - 1; }  // holds the head and loss
  int64_t virtual_stage(int64_t chunk) const { return chunk * stage_count() + stage_index(); }
  bool takes_tokens(int64_t chunk) const { return virtual_stage(chunk) == 0; }
  bool computes_loss(int64_t chunk) const { return virtual_stage(chunk) == stage_count() * chunk_count() - 1; }
  // Point-to-point tags (TensorParallelComm::send_async / recv): a virtual stage's input activations,
  // and the gradient of its outputs; training and evaluation use the same ones.
  static int activation_tag(int64_t virtual_stage) { return static_cast<int>(2 * virtual_stage); }
  static int gradient_tag(int64_t virtual_stage) { return static_cast<int>(2 * virtual_stage + 1); }
  // Chunk `chunk`'s forward: the first virtual stage takes the micro-batch's inputs, the others the
  // previous virtual stage's activations; the last returns the micro-batch's mean loss (a scalar),
  // the others their activations.
  virtual torch::Tensor forward_stage(const torch::Tensor& input, const torch::Tensor& targets, int64_t chunk) = 0;
  // The activations passed between stages for `rows` rows of `row_elements` tokens (fp32).
  virtual std::vector<int64_t> activation_shape(int64_t rows, int64_t row_elements) const = 0;
  virtual TensorParallelComm& stages() = 0;
};

}  // namespace hwt
