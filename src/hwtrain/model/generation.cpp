// Sampling from the decoder: incremental decoding with a KV cache, or recomputing the window.
#include <limits>

#include "hwtrain/model/gpt.h"

namespace hwt {
namespace {

// Puts a module back into the training mode it had, however the scope is left.
class TrainingModeGuard {
 public:
  explicit TrainingModeGuard(torch::nn::Module& module) : module_(module), was_training_(module.is_training()) {}
  ~TrainingModeGuard() { module_.train(was_training_); }
  TrainingModeGuard(const TrainingModeGuard&) = delete;
  TrainingModeGuard& operator=(const TrainingModeGuard&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

// Turns a tensor-parallel model's sequence parallelism off for a scope (decoding keeps the whole
// sequence, of any length, on every rank) and back on after.
class WholeSequenceGuard {
 public:
  explicit WholeSequenceGuard(TensorParallelComm* comm) : comm_(comm), was_(comm && comm->sequence_parallel) {
    if (comm_) comm_->sequence_parallel = false;
  }
  ~WholeSequenceGuard() {
    if (comm_) comm_->sequence_parallel = was_;
  }
  WholeSequenceGuard(const WholeSequenceGuard&) = delete;
  WholeSequenceGuard& operator=(const WholeSequenceGuard&) = delete;

 private:
  TensorParallelComm* comm_;
  bool was_;
};

// The next token (B, 1) from the last position's logits (B, V).
torch::Tensor sample_next(torch::Tensor logits_BV, double temperature, int64_t top_k, double top_p,
                          const std::optional<at::Generator>& gen) {
  if (temperature == 0.0) return logits_BV.argmax(-1, /*keepdim=*/true);
  logits_BV = logits_BV.to(torch::kFloat) / temperature;
  if (top_k > 0 && top_k < logits_BV.size(-1)) {
    auto kth_B1 = std::get<0>(logits_BV.topk(top_k, -1)).select(1, -1).unsqueeze(1);
    logits_BV = logits_BV.masked_fill(logits_BV < kth_B1, -std::numeric_limits<double>::infinity());
  }
  auto probs_BV = torch::softmax(logits_BV, -1);
  if (top_p < 1.0) {  // keep the most likely tokens until their mass reaches top_p (at least one)
    auto [sorted_BV, order_BV] = probs_BV.sort(-1, /*descending=*/true);
    auto drop_BV = (sorted_BV.cumsum(-1) - sorted_BV) >= top_p;
    probs_BV = probs_BV.scatter(-1, order_BV, sorted_BV.masked_fill(drop_BV, 0.0));
  }
  // A CPU generator samples on the CPU (B x V probabilities): the same draws on every device.
  if (gen && gen->device().is_cpu()) probs_BV = probs_BV.to(torch::kCPU);
  return torch::multinomial(probs_BV, 1, /*replacement=*/false, gen).to(logits_BV.device());
}

}  // namespace

torch::Tensor GPTImpl::forward_cached(const torch::Tensor& idx_BT, KVCache& cache) {
  return logits_of(hidden_cached(idx_BT, cache));
}

torch::Tensor GPTImpl::logits_of(const torch::Tensor& h_BTC) {
  return tp_ ? tensor_parallel_forward(h_BTC) : torch::linear(h_BTC, head_weight());
}

torch::Tensor GPTImpl::hidden_cached(const torch::Tensor& idx_BT, KVCache& cache) {
  const int64_t T = idx_BT.size(1), pos = cache.length;
  TORCH_CHECK(pos + T <= cfg_.block_size, "GPT::forward_cached: positions up to ", pos + T,
              " exceed model.block_size = ", cfg_.block_size);
  TORCH_CHECK(!tp_ || !tp_->sequence_parallel, "GPT::forward_cached needs sequence parallelism off (generate does that)");
  auto x_BTC = tp_ ? vocab_parallel_embedding(idx_BT, wte->weight, vocab_rows_, *tp_) : wte(idx_BT);
  if (wpe) x_BTC = x_BTC + wpe(torch::arange(pos, pos + T, idx_BT.options()));
  for (size_t i = 0; i < layers_.size(); ++i) x_BTC = layers_[i]->forward_cached(x_BTC, cache.layers[i], pos);
  cache.length += T;
  return norm ? norm(x_BTC) : ln_f(x_BTC);
}

torch::Tensor GPTImpl::generate(torch::Tensor idx_BT, int64_t max_new_tokens, double temperature, int64_t top_k,
                                std::optional<at::Generator> gen, double top_p, bool use_cache) {
  TORCH_CHECK(idx_BT.dim() == 2 && idx_BT.size(1) > 0, "GPT::generate expects a non-empty prompt (B, T), got ",
              idx_BT.sizes());
  TORCH_CHECK(max_new_tokens >= 0, "GPT::generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  TORCH_CHECK(temperature >= 0.0, "GPT::generate: temperature must be >= 0, got ", temperature);
  TORCH_CHECK(top_p > 0.0 && top_p <= 1.0, "GPT::generate: top_p must be in (0, 1], got ", top_p);
  TrainingModeGuard mode(*this);
  WholeSequenceGuard whole_sequence(tp_.get());  // tensor parallel: every rank runs this, collectively
  eval();
  torch::NoGradGuard no_grad;
  auto window = [&] {
    const int64_t T = idx_BT.size(1);
    return T <= cfg_.block_size ? idx_BT : idx_BT.slice(1, T - cfg_.block_size);
  };
  KVCache cache(cfg_.n_layer);
  auto last_logits = [&](const torch::Tensor& h_BTC) { return logits_of(h_BTC.slice(1, -1)).select(1, -1); };
  torch::Tensor logits_BV;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    if (!use_cache) {
      logits_BV = last_logits(hidden_states(window()));
    } else if (cache.length == 0 || cache.length + 1 > cfg_.block_size) {
      cache.clear();  // the first window, or the window slid: positions start again at 0
      logits_BV = last_logits(hidden_cached(window(), cache));
    } else {
      logits_BV = last_logits(hidden_cached(idx_BT.slice(1, -1), cache));
    }
    torch::Tensor next_B1 = sample_next(logits_BV, temperature, top_k, top_p, gen);
    // Split: the ranks' whole logits are the same bytes, so are their draws; rank 0's is taken so
    // that they cannot part ways even if their generators were seeded apart.
    if (tp_) next_B1 = tp_->all_gather(next_B1).select(0, 0);
    idx_BT = torch::cat({idx_BT, next_B1}, 1);
  }
  return idx_BT;
}

}  // namespace hwt
