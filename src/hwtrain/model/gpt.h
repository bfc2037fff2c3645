// GPT: the decoder that hwtrain trains, in two families chosen by model.architecture. gpt2: token +
// learned position embeddings, dropout, n_layer pre-LayerNorm blocks (causal self-attention, GELU
// MLP), a final LayerNorm and an LM head tied to the token embedding; GPT-2 initialization. llama:
// token embedding, LlamaBlocks (model/llama_block.h), a final RMSNorm and an untied (or tied) head;
// normal(0, 0.02) initialization as Hugging Face's. Also: cross-entropy loss in fp32, the
// parameter count (from a built model or from the config alone), the weight-decay split, the
// attention kernel switch, activation checkpointing of every k-th block, and sampling.
// It does not resolve "auto" settings or the vocabulary: the planner and the caller do.
//
// Shape letters: B batch, T sequence length, C n_embd, V vocab_size.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "hwtrain/model/attention.h"
#include "hwtrain/model/block.h"
#include "hwtrain/model/deferred_init.h"
#include "hwtrain/model/kv_cache.h"
#include "hwtrain/model/llama_block.h"
#include "hwtrain/model/model_config.h"
#include "hwtrain/model/parameter_units.h"
#include "hwtrain/model/tensor_parallel.h"
#include "hwtrain/model/tied_embedding.h"

namespace hwt {

class GPTImpl : public torch::nn::Module {
 public:
  // vocab_size is the resolved one (cfg.vocab_size may be 0 = "from the tokenizer"). Throws
  // ConfigError for non-positive sizes, n_embd not divisible by n_head, dropout outside [0, 1).
  // deferred: build with placeholders for a sharding engine to fill unit by unit
  // (model/deferred_init.h): the same values and the same generator state as without, but never
  // the whole model in memory; parameter_units() then carries each unit's initial values.
  GPTImpl(const ModelConfig& cfg, int64_t vocab_size,
          AttentionKernel kernel = AttentionKernel::Sdpa, std::shared_ptr<DeferredInit> deferred = nullptr);

  // Module::to, which moves a deferred model's placeholders without materializing them.
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;
  bool deferred() const { return deferred_ != nullptr; }
  // A deferred model's placeholders filled with their values (under tensor parallelism, this rank's
  // cut of each), for a run no sharding engine fills: one whole weight at a time at most.
  void materialize_parameters();

  // idx_BT: int64 token ids, T <= block_size. Returns logits_BTV in the dtype the matmul produced
  // (fp32, or the autocast dtype under autocast).
  torch::Tensor forward(const torch::Tensor& idx_BT);
  // Mean cross entropy, computed in fp32; targets equal to -1 are ignored (padding).
  torch::Tensor loss(const torch::Tensor& logits_BTV, const torch::Tensor& targets_BT) const;
  // loss(forward(idx_BT), targets_BT), or with the fused chunked head (model/lm_head_loss.h) when
  // set_fused_lm_head_loss(true): the same value and gradients without the whole logits tensor.
  torch::Tensor forward_loss(const torch::Tensor& idx_BT, const torch::Tensor& targets_BT);
  // The final LayerNorm's output (B, T, C): what the LM head reads. `head_follows`: the caller's
  // loss goes through this model's head in the same graph (forward, forward_loss), so a tied
  // embedding may give its weight a sparse gradient that the head's dense one absorbs
  // (model/tied_embedding.h: the same gradient, no vocab x dim buffer).
  torch::Tensor hidden_states(const torch::Tensor& idx_BT, bool head_follows = false);
  // hidden_states and forward_loss in pieces, for pipeline stages (model/gpt_stage.h): the token
  // (and position) embeddings; blocks [begin, end) with their activation checkpointing; the final
  // norm; the head and loss on the final norm's output.
  torch::Tensor embed(const torch::Tensor& idx_BT, bool head_follows = false);
  torch::Tensor run_blocks(torch::Tensor x_BTC, int64_t begin, int64_t end);
  torch::Tensor final_norm(const torch::Tensor& x_BTC);
  torch::Tensor head_loss(const torch::Tensor& x_BTC, const torch::Tensor& targets_BT);

  // Parameters (the tied head counted once); position embeddings excluded by default, as GPT-2's
  // "124M" and nanoGPT's report do.
  int64_t num_parameters(bool exclude_position_embedding = true) const;
  // The same number from the shape alone, for planning before a model is built.
  static int64_t count_parameters(const ModelConfig& cfg, int64_t vocab_size,
                                  bool exclude_position_embedding = true);

  // Weight decay applies to Linear weights only; biases, LayerNorms and embeddings (the tied LM
  // head included) go to no_decay. Every parameter lands in exactly one list.
  void decay_and_no_decay(std::vector<torch::Tensor>& decay, std::vector<torch::Tensor>& no_decay);
  // The same split with each parameter's name (the key of its optimizer state in checkpoints).
  void named_decay_and_no_decay(std::vector<std::pair<std::string, torch::Tensor>>& decay,
                                std::vector<std::pair<std::string, torch::Tensor>>& no_decay);

  // Appends max_new_tokens sampled tokens to idx_BT, each from the logits of the last block_size
  // tokens. temperature 0 = greedy; top_k <= 0 = no top-k filter; top_p < 1 = nucleus sampling
  // (the smallest set of tokens whose probabilities reach top_p). With use_cache the model runs on
  // each new token alone (KVCache), re-reading the window only when it slides past block_size;
  // without, it recomputes the window every token (the reference). Runs in eval mode under
  // NoGradGuard and restores the previous mode. gen: the generator to sample with (default: the
  // global one; a CPU generator samples on the CPU, the same draws on every device). A tensor-
  // parallel model decodes split: every rank of its group calls this with the same arguments and
  // generator seed, holds its heads' keys and values, gets the whole logits and draws the same
  // tokens (sequence parallelism is off meanwhile). micro_batches: the rows decoded in that many
  // groups, each step in turn (decoding.h): the draws a pipeline's micro-batched decoding makes.
  torch::Tensor generate(torch::Tensor idx_BT, int64_t max_new_tokens, double temperature = 1.0,
                         int64_t top_k = 0, std::optional<at::Generator> gen = std::nullopt, double top_p = 1.0,
                         bool use_cache = true, int64_t micro_batches = 1);
  // Logits (B, T, V) of the T positions that follow those in `cache` (eval, no grad); appends
  // their keys and values. cache.length + T <= block_size. Tensor parallel: collective, the whole
  // logits on every rank, sequence parallelism off.
  torch::Tensor forward_cached(const torch::Tensor& idx_BT, KVCache& cache);
  // forward_cached in pieces, for pipeline stages (GptStage::generate), without unit hooks (the
  // weights are whole or gathered): the token (and position) embeddings of positions pos, pos + 1,
  // ...; blocks [begin, end) on the positions after cache.length (appending their keys and values;
  // the caller advances cache.length once all blocks have run); the final norm; the logits of
  // final-norm outputs (whole, gathered under tensor parallelism).
  torch::Tensor embed_at(const torch::Tensor& idx_BT, int64_t pos);
  torch::Tensor blocks_cached(torch::Tensor x_BTC, KVCache& cache, int64_t begin, int64_t end);
  torch::Tensor norm_of(const torch::Tensor& x_BTC);
  torch::Tensor logits_of(const torch::Tensor& h_BTC);

  void set_attention_kernel(AttentionKernel kernel);
  AttentionKernel attention_kernel() const { return kernel_; }
  void clear_mask_cache() { mask_cache_->clear(); }
  const CausalMaskCache& mask_cache() const { return *mask_cache_; }

  // 0 = none, 1 = every block, k = blocks 0, k, 2k, ... Applied only when training with grad mode
  // on; eval and no-grad passes run plainly. Throws ConfigError for k < 0.
  void set_activation_checkpointing(int64_t every_k);
  int64_t activation_checkpointing() const { return checkpoint_every_; }
  bool is_block_checkpointed(int64_t layer) const;

  // The parameters in units, in forward order (model/parameter_units.h): the embeddings (with the
  // final norm when the head is tied: "rest"), one unit per block, then, untied, the final norm and
  // head ("head"); every parameter in exactly one unit. Hooks (null = none) run around the units.
  std::vector<ParameterUnit> parameter_units();
  void set_unit_hooks(std::shared_ptr<UnitHooks> hooks) { unit_hooks_ = std::move(hooks); }
  UnitHooks* unit_hooks() const { return unit_hooks_.get(); }

  // Tensor parallelism (model/tensor_parallel.h, Megatron-LM's layout): cuts every weight to this
  // rank's shard in place (tensor_parallel_spec) and from then on runs on the shards over `comm`:
  // vocabulary-parallel embedding, head and loss; column-parallel q/k/v and MLP inputs; row-parallel
  // outputs; norms and position embeddings whole on every rank. Call once, on a model built from the
  // same seed on every rank, before an optimizer holds its parameters. ConfigError when the heads,
  // key/value heads or MLP width do not divide by the group's size or the vocabulary is smaller.
  // forward() then returns the whole logits, gathered without gradient (evaluation, sampling);
  // forward_loss never builds them (the fused LM-head loss is not used: the slices are its saving).
  // sequence_parallel: between the layers each rank keeps T / t positions (model/tensor_parallel.h);
  // model.block_size must divide by the group's size.
  void set_tensor_parallel(std::shared_ptr<TensorParallelComm> comm, bool sequence_parallel = false);
  TensorParallelComm* tensor_parallel() const { return tp_.get(); }
  // Under sequence parallelism each rank's gradients of the weights it holds whole (norms, position
  // embeddings, row-parallel biases) cover its slice of the sequence: summed over the group here,
  // after backward (collective). Nothing otherwise. `grads`: the gradients by parameter name (the
  // parameters' own, or shards laid out alike on every rank of the group); default: their own.
  void sum_sequence_parallel_gradients();
  void sum_sequence_parallel_gradients(const std::vector<std::pair<std::string, torch::Tensor>>& grads);
  // How parameter `name`, or its optimizer state "exp_avg.<name>" / "exp_avg_sq.<name>", is cut.
  ShardSpec tensor_parallel_spec(const std::string& name) const;
  // The whole tensor's length along its cut dimension, for a name tensor_parallel_spec cuts.
  int64_t whole_rows(const std::string& name) const;

  void set_fused_lm_head_loss(bool on) { fused_lm_head_loss_ = on; }
  bool uses_fused_lm_head_loss() const { return fused_lm_head_loss_; }

  const ModelConfig& config() const { return cfg_; }
  int64_t vocab_size() const { return vocab_size_; }

  // The weight the LM head multiplies by: the token embedding, or llama's untied lm_head.
  torch::Tensor head_weight() const { return lm_head ? lm_head->weight : wte->weight; }

  // gpt2: wte, wpe, h.N (Block), ln_f. llama: embed_tokens (wte here), layers.N (LlamaBlock), norm,
  // lm_head unless tie_word_embeddings: Hugging Face's names without "model.".
  torch::nn::Embedding wte{nullptr};  // token embedding, also the LM head when tied
  torch::nn::Embedding wpe{nullptr};  // learned position embedding (gpt2 only)
  torch::nn::ModuleList h{nullptr};   // the blocks
  LayerNorm ln_f{nullptr};            // gpt2's final norm
  RMSNorm norm{nullptr};              // llama's final norm
  torch::nn::Linear lm_head{nullptr}; // llama's untied head

 private:
  void init_weights();
  void init_normal(const torch::Tensor& weight, double std);  // weight.normal_(0, std), or deferred
  void release(torch::nn::Module& module, const std::string& name);  // deferred: its placeholders
  torch::Tensor tensor_parallel_forward(const torch::Tensor& x_BTC);
  // forward_cached without the head: the final norm's output of the new positions (generate takes
  // the last position's logits alone).
  torch::Tensor hidden_cached(const torch::Tensor& idx_BT, KVCache& cache);
  torch::Tensor tensor_parallel_loss(const torch::Tensor& x_BTC, const torch::Tensor& targets_BT);
  // head_weight(), paired with this forward's tied lookup when embed() made one (model/tied_embedding.h).
  torch::Tensor paired_head_weight();

  ModelConfig cfg_;
  int64_t vocab_size_;
  AttentionKernel kernel_;
  int64_t checkpoint_every_ = 0;
  bool fused_lm_head_loss_ = false;
  std::shared_ptr<CausalMaskCache> mask_cache_;
  torch::nn::Dropout drop_{nullptr};
  std::vector<Block> blocks_;  // gpt2: the same modules as h, typed
  std::vector<std::shared_ptr<DecoderBlockImpl>> layers_;  // the modules of h, either family
  std::shared_ptr<RotaryCache> rotary_;  // llama
  std::shared_ptr<UnitHooks> unit_hooks_;
  std::shared_ptr<DeferredInit> deferred_;
  std::shared_ptr<TensorParallelComm> tp_;
  RowRange vocab_rows_;                         // this rank's rows of the vocabulary under tensor parallelism
  std::map<std::string, int64_t> whole_rows_;  // a cut parameter's whole length along its cut dimension
  c10::intrusive_ptr<TiedGradientSlot> tied_slot_;  // set by embed() for the head of the same forward
};
TORCH_MODULE(GPT);

}  // namespace hwt
