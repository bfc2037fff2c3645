// GptStage: one pipeline stage of the built-in decoder (either family) as a TrainableModel and a
// PipelineStage: blocks [begin, end) of a GPT built whole from the run's seed on every stage (so
// the stages hold exactly the weights one process would; with interleaving, one such range per model
// chunk: model/pipeline_stage.h), with the embeddings on the first stage
// and the final norm, LM head and loss on the last. The weights of the other stages are freed. A
// tied head (GPT-2, tie_word_embeddings) keeps a copy of the embedding on the first and the last
// stage; their gradients are summed over `shared` (those two stages) so the copies stay equal, and
// the gradient norm counts it once. Names are the whole model's ("h.7.attn.c_attn.weight"), and
// whole_tensors gathers every stage's tensors over the pipeline group, so checkpoints hold the whole
// model and resume on any layout. The GPT may be tensor-parallel (GPT::set_tensor_parallel, before
// the stage is made): the stage's tensors are then joined over its tensor group first. forward_loss runs the micro-batch through every stage without
// gradients (evaluation); training goes through the 1F1B schedule (train/pipeline_step.h).
// Under ZeRO-3 each unit is gathered for every micro-batch's forward and again for its backward (as
// the whole model gathers it for each accumulated micro-batch); the units a stage keeps past their
// forward (a tied embedding, the head) are gathered again for a backward that finds them freed.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/model/gpt.h"
#include "hwtrain/model/pipeline_stage.h"
#include "hwtrain/model/trainable_model.h"

namespace hwt {

struct BlockRange {
  int64_t begin = 0, end = 0;  // blocks [begin, end)
};

struct StagePlace {
  int64_t index = 0, count = 1;
  std::vector<BlockRange> chunks;  // chunk c: virtual stage c count + index (one chunk: no interleaving)
};

class GptStage : public TrainableModel, public PipelineStage {
 public:
  // `stages`: the pipeline group (rank = stage index); `shared`: the first and last stages (rank 0
  // the first), for a tied head on more than one stage, else null.
  GptStage(GPT gpt, StagePlace place, std::shared_ptr<TensorParallelComm> stages,
           std::shared_ptr<TensorParallelComm> shared);

  torch::nn::Module& module() override { return *stage_; }
  torch::Tensor forward_loss(const torch::Tensor& x_BT, const torch::Tensor& y_BT) override;
  void named_decay_and_no_decay(NamedParameters& decay, NamedParameters& no_decay) override;
  bool set_activation_checkpointing(int64_t every_k) override;
  bool set_cast_outputs(bool on) override { return on; }
  double training_flops_per_row(int64_t row_elements) override;
  std::string checkpoint_format() const override { return "hwtrain-gpt"; }

  bool model_parallel() const override { return true; }
  NamedParameters whole_tensors(NamedParameters local) override;
  NamedParameters local_tensors(NamedParameters whole) const override;
  bool checkpoint_writer() const override;
  torch::Tensor squared_norm_share(const torch::Tensor& local_squared, const NamedParameters& grads) override;
  void model_parallel_sum(torch::Tensor& t) override;  // over the tensor group, then the stages
  PipelineStage* pipeline_stage() override { return this; }

  int64_t stage_index() const override { return place_.index; }
  int64_t stage_count() const override { return place_.count; }
  int64_t chunk_count() const override { return static_cast<int64_t>(place_.chunks.size()); }
  torch::Tensor forward_stage(const torch::Tensor& input, const torch::Tensor& targets, int64_t chunk) override;
  std::vector<int64_t> activation_shape(int64_t rows, int64_t row_elements) const override;
  TensorParallelComm& stages() override { return *stages_; }
  // Sequence-parallel gradients over the tensor group, then the tied embedding's two copies.
  void sum_shared_gradients(const NamedParameters& grads) override;
  // The GPT's units cut to this stage's weights; a tied embedding held by two stages is a unit of
  // its own, so that ZeRO-2 lays out its shards alike on both and they sum like the whole gradients.
  std::vector<ParameterUnit> parameter_units() override;
  // ZeRO-3: the engine's hooks, indexed by this stage's units; the GPT's hook calls (by its own
  // units) are mapped to them, and forward_stage adds the ones a stage needs beyond the GPT's.
  bool supports_unit_hooks() const override { return true; }
  void set_unit_hooks(std::shared_ptr<UnitHooks> hooks) override;

  // Decoding over the stages, with GPT::generate's arguments and result: every rank of the pipeline
  // (and of each stage's tensor group) calls it with the same ones. Each stage runs its blocks on the
  // new positions with a KV cache of its own and passes the activations on (tagged by virtual stage
  // as evaluation's are); the last stage samples and sends each token back to the first, which
  // embeds it at its micro-batch's next step; every rank returns the last stage's tokens. With
  // micro_batches = m > 1 the rows go as m micro-batches with a cache each, so that while one is on
  // a stage the others fill the rest: at m >= p every stage works at once (one micro-batch, or
  // one sequence, leaves p - 1 stages waiting). The tokens are GPT::generate's with the same
  // micro_batches (the same draws in the same order).
  torch::Tensor generate(torch::Tensor idx_BT, int64_t max_new_tokens, double temperature = 1.0, int64_t top_k = 0,
                         std::optional<at::Generator> gen = std::nullopt, double top_p = 1.0, bool use_cache = true,
                         int64_t micro_batches = 1);

  GPT& gpt() { return gpt_; }

 private:
  struct Decoding;  // generate's state (model/stage_generation.cpp)
  // Chunk `chunk` of micro-batch j's decoding step: its token on the last virtual stage, else undefined.
  torch::Tensor decode_chunk(Decoding& d, size_t j, int64_t chunk);
  void decode_step_overlapped(Decoding& d);  // every chunk over every micro-batch, tokens sent back
  void decode_step_in_turn(Decoding& d);     // one micro-batch through all chunks at a time, tokens gathered
  bool holds_tied_copy() const;  // the last stage's copy of a tied embedding (the first holds the original)
  bool shares_embedding() const { return shared_ && (is_first() || is_last()); }
  std::string embedding_name() const;

  GPT gpt_;
  StagePlace place_;
  std::shared_ptr<TensorParallelComm> stages_, shared_;
  std::shared_ptr<torch::nn::Module> stage_;  // this stage's modules under their whole-model names
  // Every parameter of the whole model, in order, with its shape and dtype: what whole_tensors fills.
  std::vector<std::pair<std::string, torch::Tensor>> whole_meta_;
  torch::Device device_ = torch::kCPU;  // where the weights live (and the gathers run)
};

}  // namespace hwt
