// GPT-2-style decoder: construction and init, forward with optional activation checkpointing,
// loss, parameter accounting and weight-decay groups (sampling: model/generation.cpp).
#include "hwtrain/model/gpt.h"

#include <cmath>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>

#include "hwtrain/core/error.h"
#include "hwtrain/model/activation_checkpoint.h"
#include "hwtrain/model/lm_head_loss.h"
#include "hwtrain/model/tied_embedding.h"
#include "hwtrain/model/token_loss.h"

namespace hwt {
namespace {

void require_positive(const char* key, int64_t value) {
  if (value <= 0) {
    throw ConfigError(std::string("model.") + key + " = " + std::to_string(value) +
                      " must be a positive integer");
  }
}

void validate(const ModelConfig& cfg, int64_t vocab_size) {
  require_positive("n_layer", cfg.n_layer);
  require_positive("n_head", cfg.n_head);
  require_positive("n_embd", cfg.n_embd);
  require_positive("block_size", cfg.block_size);
  require_positive("vocab_size", vocab_size);
  if (cfg.n_embd % cfg.n_head != 0) {
    throw ConfigError("model.n_embd = " + std::to_string(cfg.n_embd) +
                      " is not divisible by model.n_head = " + std::to_string(cfg.n_head) +
                      "; choose n_head dividing n_embd (each head gets n_embd / n_head channels)");
  }
  if (!(cfg.dropout >= 0.0 && cfg.dropout < 1.0)) {
    throw ConfigError("model.dropout = " + std::to_string(cfg.dropout) + " must be in [0, 1)");
  }
}

}  // namespace

GPTImpl::GPTImpl(const ModelConfig& cfg, int64_t vocab_size, AttentionKernel kernel,
                 std::shared_ptr<DeferredInit> deferred)
    : cfg_(cfg), vocab_size_(vocab_size), kernel_(kernel),
      mask_cache_(std::make_shared<CausalMaskCache>()), deferred_(std::move(deferred)) {
  validate(cfg_, vocab_size_);
  cfg_.validate();
  const int64_t C = cfg_.n_embd;
  const bool llama = cfg_.is_llama();
  wte = register_module(llama ? "embed_tokens" : "wte", torch::nn::Embedding(vocab_size_, C));
  release(*wte, llama ? "embed_tokens" : "wte");
  if (!llama) {
    wpe = register_module("wpe", torch::nn::Embedding(cfg_.block_size, C));
    release(*wpe, "wpe");
  }
  drop_ = register_module("drop", torch::nn::Dropout(cfg_.dropout));
  h = register_module(llama ? "layers" : "h", torch::nn::ModuleList());
  if (llama) rotary_ = std::make_shared<RotaryCache>(cfg_);
  const BlockOptions block_options{C, cfg_.n_head, cfg_.dropout, cfg_.bias, cfg_.activation == Activation::kGeluTanh};
  for (int64_t i = 0; i < cfg_.n_layer; ++i) {
    if (llama) {
      auto block = std::make_shared<LlamaBlockImpl>(cfg_, rotary_, mask_cache_, kernel_);
      layers_.push_back(block);
      h->push_back(block);
    } else {
      blocks_.emplace_back(block_options, mask_cache_, kernel_);
      layers_.push_back(blocks_.back().ptr());
      h->push_back(blocks_.back());
    }
    release(*layers_.back(), (llama ? "layers." : "h.") + std::to_string(i));
  }
  if (llama) {
    norm = register_module("norm", RMSNorm(C, cfg_.rms_norm_eps));
    release(*norm, "norm");
    if (!cfg_.tie_word_embeddings) {
      lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(C, vocab_size_).bias(false)));
      release(*lm_head, "lm_head");
    }
  } else {
    ln_f = register_module("ln_f", LayerNorm(C, cfg_.bias));
    release(*ln_f, "ln_f");
  }
  init_weights();
}

void GPTImpl::release(torch::nn::Module& module, const std::string& name) {
  if (deferred_) deferred_->release(module, name + ".");
}

void GPTImpl::init_normal(const torch::Tensor& weight, double std) {
  if (deferred_) {
    deferred_->normal(weight, 0.0, std);
  } else {
    torch::Tensor w = weight;
    w.normal_(0.0, std);
  }
}

void GPTImpl::init_weights() {
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      init_normal(linear->weight, 0.02);
      if (!linear->bias.defined()) continue;
      if (deferred_) deferred_->fill(linear->bias, 0.0);
      else linear->bias.zero_();
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      init_normal(embedding->weight, 0.02);
    }
  }
  if (cfg_.is_llama()) return;  // Hugging Face's Llama: normal(0, 0.02) everywhere, norms at one
  // GPT-2: each block adds two residual branches, so their output projections are scaled down
  // by 1/sqrt(2 n_layer) to keep the residual stream's variance from growing with depth.
  const double residual_std = 0.02 / std::sqrt(2.0 * double(cfg_.n_layer));
  for (auto& block : blocks_) {
    init_normal(block->attn->c_proj->weight, residual_std);
    init_normal(block->mlp->c_proj->weight, residual_std);
  }
}

void GPTImpl::materialize_parameters() {
  if (!deferred_) return;
  torch::NoGradGuard no_grad;
  for (auto& p : parameters()) {
    if (!is_placeholder(p)) continue;
    torch::Tensor value = torch::empty(p.sizes(), torch::kFloat);
    deferred_->materialize(p, value);
    p.set_data(value.to(p.options()));
  }
}

void GPTImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  if (deferred_) deferred_->retarget(*this, device, dtype);
  torch::nn::Module::to(device, dtype, non_blocking);
}

void GPTImpl::to(torch::Dtype dtype, bool non_blocking) {
  if (deferred_) deferred_->retarget(*this, std::nullopt, dtype);
  torch::nn::Module::to(dtype, non_blocking);
}

void GPTImpl::to(torch::Device device, bool non_blocking) {
  if (deferred_) deferred_->retarget(*this, device, std::nullopt);
  torch::nn::Module::to(device, non_blocking);
}

torch::Tensor GPTImpl::forward(const torch::Tensor& idx_BT) {
  return logits_of(hidden_states(idx_BT, /*head_follows=*/true));
}

torch::Tensor GPTImpl::forward_loss(const torch::Tensor& idx_BT, const torch::Tensor& targets_BT) {
  return head_loss(hidden_states(idx_BT, /*head_follows=*/true), targets_BT);
}

torch::Tensor GPTImpl::head_loss(const torch::Tensor& x_BTC, const torch::Tensor& targets_BT) {
  if (tp_) return tensor_parallel_loss(x_BTC, targets_BT);
  if (!fused_lm_head_loss_) return loss(torch::linear(x_BTC, paired_head_weight()), targets_BT);
  return hwt::fused_lm_head_loss(x_BTC.reshape({-1, cfg_.n_embd}), paired_head_weight(), targets_BT.reshape({-1}));
}

torch::Tensor GPTImpl::paired_head_weight() {
  c10::intrusive_ptr<TiedGradientSlot> slot = std::exchange(tied_slot_, {});
  return slot ? tied_head_weight(head_weight(), std::move(slot)) : head_weight();
}

torch::Tensor GPTImpl::hidden_states(const torch::Tensor& idx_BT, bool head_follows) {
  const std::shared_ptr<UnitHooks> hooks = unit_hooks_;  // units in forward order: parameter_units()
  if (hooks) hooks->begin_forward();
  auto x_BTC = embed(idx_BT, head_follows);
  // The embeddings' backward reads only the token ids (a tied rest comes back in final_norm). An
  // evaluation forward keeps a tied rest instead of gathering it twice: it holds no activations.
  if (hooks && (!cfg_.tied_head() || torch::GradMode::is_enabled())) hooks->release(0);
  x_BTC = run_blocks(x_BTC, 0, cfg_.n_layer);
  return final_norm(x_BTC);
}

torch::Tensor GPTImpl::final_norm(const torch::Tensor& x_in) {
  torch::Tensor x_BTC = x_in;
  if (unit_hooks_ && cfg_.tied_head()) {  // the tied rest again: final norm and head, freed after their backward
    unit_hooks_->before_reuse(0);
    x_BTC = unit_hooks_->release_after_backward(0, x_BTC);
  } else if (unit_hooks_) {
    unit_hooks_->before_forward(layers_.size() + 1);  // the final norm and head
  }
  return norm ? norm(x_BTC) : ln_f(x_BTC);
}

torch::Tensor GPTImpl::embed(const torch::Tensor& idx_BT, bool head_follows) {
  TORCH_CHECK(idx_BT.dim() == 2, "GPT::forward expects token ids (B, T), got ", idx_BT.sizes());
  TORCH_CHECK(idx_BT.scalar_type() == torch::kLong, "GPT::forward expects int64 token ids, got ",
              idx_BT.scalar_type());
  const int64_t T = idx_BT.size(1);
  TORCH_CHECK(T <= cfg_.block_size, "GPT::forward: sequence length ", T,
              " exceeds model.block_size = ", cfg_.block_size);

  if (unit_hooks_) unit_hooks_->before_forward(0);
  // Under a tied head that follows, the head's gradient absorbs the lookup's rows (tied_embedding.h).
  // On the CPU only: on CUDA its unique() waits for the device and cannot be captured in a CUDA graph.
  const bool rows_only = head_follows && cfg_.tied_head() && wte->weight.requires_grad() &&
                         wte->weight.device().is_cpu() && torch::GradMode::is_enabled();
  torch::Tensor x_BTC;
  tied_slot_ = rows_only ? c10::make_intrusive<TiedGradientSlot>() : c10::intrusive_ptr<TiedGradientSlot>();
  if (tp_) {
    x_BTC = vocab_parallel_embedding(idx_BT, wte->weight, vocab_rows_, *tp_, rows_only, tied_slot_);
  } else {
    x_BTC = rows_only ? tied_embedding_lookup(idx_BT, wte->weight, tied_slot_) : wte(idx_BT);
  }
  if (wpe) {
    torch::Tensor positions = torch::arange(T, idx_BT.options());
    if (tp_ && tp_->sequence_parallel) {  // this rank's slice of the sequence
      positions = positions.narrow(0, tp_->rank() * (T / tp_->size()), T / tp_->size());
    }
    x_BTC = x_BTC + wpe(positions);
  }
  return drop_(x_BTC);
}

torch::Tensor GPTImpl::run_blocks(torch::Tensor x_BTC, int64_t begin, int64_t end) {
  const std::shared_ptr<UnitHooks> hooks = unit_hooks_;
  const bool checkpoint = checkpoint_every_ > 0 && is_training() && torch::GradMode::is_enabled();
  for (int64_t i = begin; i < end; ++i) {
    const std::shared_ptr<DecoderBlockImpl>& impl = layers_[i];
    const size_t unit = static_cast<size_t>(i) + 1;
    if (hooks) hooks->before_forward(unit);
    if (checkpoint && is_block_checkpointed(i)) {
      auto run = [impl, hooks, unit](const torch::Tensor& x) {
        if (hooks) hooks->before_forward(unit);  // the recomputation in backward needs the weights too
        return impl->forward(x);
      };
      x_BTC = checkpointed(run, x_BTC, impl->parameters());
    } else {
      x_BTC = impl->forward(x_BTC);
    }
    if (hooks) x_BTC = hooks->after_forward(unit, x_BTC);
  }
  return x_BTC;
}

torch::Tensor GPTImpl::loss(const torch::Tensor& logits_BTV,
                            const torch::Tensor& targets_BT) const {
  return token_cross_entropy(logits_BTV.reshape({-1, logits_BTV.size(-1)}), targets_BT.reshape({-1}));
}

int64_t GPTImpl::num_parameters(bool exclude_position_embedding) const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  if (exclude_position_embedding && wpe) n -= wpe->weight.numel();
  return n;
}

int64_t GPTImpl::count_parameters(const ModelConfig& cfg, int64_t vocab_size,
                                  bool exclude_position_embedding) {
  return count_model_parameters(cfg, vocab_size, !exclude_position_embedding);
}

void GPTImpl::named_decay_and_no_decay(std::vector<std::pair<std::string, torch::Tensor>>& decay,
                                       std::vector<std::pair<std::string, torch::Tensor>>& no_decay) {
  std::unordered_set<const c10::TensorImpl*> linear_weights, seen;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      linear_weights.insert(linear->weight.unsafeGetTensorImpl());
    }
  }
  for (auto& item : named_parameters()) {
    const auto* impl = item.value().unsafeGetTensorImpl();
    if (!seen.insert(impl).second) continue;  // a tied parameter counts once
    (linear_weights.count(impl) ? decay : no_decay).emplace_back(item.key(), item.value());
  }
}

void GPTImpl::decay_and_no_decay(std::vector<torch::Tensor>& decay, std::vector<torch::Tensor>& no_decay) {
  std::vector<std::pair<std::string, torch::Tensor>> named_decay, named_no_decay;
  named_decay_and_no_decay(named_decay, named_no_decay);
  for (auto& [name, p] : named_decay) decay.push_back(p);
  for (auto& [name, p] : named_no_decay) no_decay.push_back(p);
}

std::vector<ParameterUnit> GPTImpl::parameter_units() {
  std::vector<std::pair<std::string, torch::Tensor>> all;
  for (auto& item : named_parameters()) all.emplace_back(item.key(), item.value());
  std::unordered_set<const c10::TensorImpl*> in_blocks, embeddings;
  std::vector<ParameterUnit> blocks;
  const std::string list = cfg_.is_llama() ? "layers." : "h.";
  for (size_t i = 0; i < layers_.size(); ++i) {
    ParameterUnit unit{list + std::to_string(i), {}, {}};
    std::unordered_set<const c10::TensorImpl*> mine;
    for (const auto& p : layers_[i]->parameters()) mine.insert(p.unsafeGetTensorImpl());
    for (const auto& [name, p] : all) {
      if (mine.count(p.unsafeGetTensorImpl())) unit.params.emplace_back(name, p);
    }
    in_blocks.insert(mine.begin(), mine.end());
    blocks.push_back(std::move(unit));
  }
  embeddings.insert(wte->weight.unsafeGetTensorImpl());
  if (wpe) embeddings.insert(wpe->weight.unsafeGetTensorImpl());
  // Tied: one unit for all the rest (the head is the embedding). Untied: embeddings first, the final
  // norm and the head last, each gathered only around its own use.
  const bool split = !cfg_.tied_head();
  ParameterUnit first{split ? "embed" : "rest", {}, {}}, last{"head", {}, {}};
  for (const auto& [name, p] : all) {
    if (in_blocks.count(p.unsafeGetTensorImpl())) continue;
    (!split || embeddings.count(p.unsafeGetTensorImpl()) ? first : last).params.emplace_back(name, p);
  }
  std::vector<ParameterUnit> units{std::move(first)};
  for (auto& b : blocks) units.push_back(std::move(b));
  if (split) units.push_back(std::move(last));
  if (deferred_) {
    for (auto& u : units) {
      u.initial_value = [d = deferred_](const torch::Tensor& p, torch::Tensor& out) { d->materialize(p, out); };
    }
  }
  return units;
}

void GPTImpl::set_attention_kernel(AttentionKernel kernel) {
  kernel_ = kernel;
  for (auto& layer : layers_) layer->set_kernel(kernel);
}

void GPTImpl::set_activation_checkpointing(int64_t every_k) {
  if (every_k < 0) {
    throw ConfigError("optimization.checkpoint_every = " + std::to_string(every_k) +
                      " must be >= 0 (0 = none, 1 = every block, k = every k-th block)");
  }
  checkpoint_every_ = every_k;
}

bool GPTImpl::is_block_checkpointed(int64_t layer) const {
  return checkpoint_every_ > 0 && layer % checkpoint_every_ == 0;
}

}  // namespace hwt
