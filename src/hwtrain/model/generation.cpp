// Sampling from the decoder: incremental decoding with a KV cache, or recomputing the window.
#include "hwtrain/model/decoding.h"
#include "hwtrain/model/gpt.h"

namespace hwt {

torch::Tensor GPTImpl::forward_cached(const torch::Tensor& idx_BT, KVCache& cache) {
  return logits_of(hidden_cached(idx_BT, cache));
}

torch::Tensor GPTImpl::logits_of(const torch::Tensor& h_BTC) {
  return tp_ ? tensor_parallel_forward(h_BTC) : torch::linear(h_BTC, paired_head_weight());
}

torch::Tensor GPTImpl::hidden_cached(const torch::Tensor& idx_BT, KVCache& cache) {
  torch::Tensor x_BTC = blocks_cached(embed_at(idx_BT, cache.length), cache, 0, cfg_.n_layer);
  cache.length += idx_BT.size(1);
  return norm_of(x_BTC);
}

torch::Tensor GPTImpl::embed_at(const torch::Tensor& idx_BT, int64_t pos) {
  const int64_t T = idx_BT.size(1);
  TORCH_CHECK(pos + T <= cfg_.block_size, "GPT::forward_cached: positions up to ", pos + T,
              " exceed model.block_size = ", cfg_.block_size);
  TORCH_CHECK(!tp_ || !tp_->sequence_parallel, "GPT::forward_cached needs sequence parallelism off (generate does that)");
  auto x_BTC = tp_ ? vocab_parallel_embedding(idx_BT, wte->weight, vocab_rows_, *tp_) : wte(idx_BT);
  if (wpe) x_BTC = x_BTC + wpe(torch::arange(pos, pos + T, idx_BT.options()));
  return x_BTC;
}

torch::Tensor GPTImpl::blocks_cached(torch::Tensor x_BTC, KVCache& cache, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    x_BTC = layers_[static_cast<size_t>(i)]->forward_cached(x_BTC, cache.layers[static_cast<size_t>(i)], cache.length);
  }
  return x_BTC;
}

torch::Tensor GPTImpl::norm_of(const torch::Tensor& x_BTC) { return norm ? norm(x_BTC) : ln_f(x_BTC); }

torch::Tensor GPTImpl::generate(torch::Tensor idx_BT, int64_t max_new_tokens, double temperature, int64_t top_k,
                                std::optional<at::Generator> gen, double top_p, bool use_cache, int64_t micro_batches) {
  check_decode_arguments(idx_BT, max_new_tokens, temperature, top_p, micro_batches);
  TrainingModeGuard mode(*this);
  WholeSequenceGuard whole_sequence(tp_.get());  // tensor parallel: every rank runs this, collectively
  eval();
  torch::NoGradGuard no_grad;
  auto next = [&](const torch::Tensor& ids_BT, KVCache* cache) {
    const torch::Tensor h_BTC = cache ? hidden_cached(ids_BT, *cache) : hidden_states(ids_BT);
    torch::Tensor next_B1 = sample_next(logits_of(h_BTC.slice(1, -1)).select(1, -1), temperature, top_k, top_p, gen);
    // Split: the ranks' whole logits are the same bytes, so are their draws; rank 0's is taken so
    // that they cannot part ways even if their generators were seeded apart.
    return tp_ ? tp_->all_gather(next_B1).select(0, 0) : next_B1;
  };
  return decode_tokens(std::move(idx_BT), {max_new_tokens, cfg_.block_size, cfg_.n_layer, use_cache, micro_batches},
                       next);
}

}  // namespace hwt
