#include "hwtrain/model/decoding.h"

#include <algorithm>
#include <limits>

namespace hwt {

void check_decode_arguments(const torch::Tensor& idx_BT, int64_t max_new_tokens, double temperature, double top_p,
                            int64_t micro_batches) {
  TORCH_CHECK(micro_batches >= 1, "GPT::generate: micro_batches must be >= 1, got ", micro_batches);
  TORCH_CHECK(idx_BT.dim() == 2 && idx_BT.size(1) > 0, "GPT::generate expects a non-empty prompt (B, T), got ",
              idx_BT.sizes());
  TORCH_CHECK(max_new_tokens >= 0, "GPT::generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  TORCH_CHECK(temperature >= 0.0, "GPT::generate: temperature must be >= 0, got ", temperature);
  TORCH_CHECK(top_p > 0.0 && top_p <= 1.0, "GPT::generate: top_p must be in (0, 1], got ", top_p);
}

std::vector<std::pair<int64_t, int64_t>> micro_batch_rows(int64_t rows, int64_t micro_batches) {
  const int64_t m = std::max<int64_t>(1, std::min(rows, micro_batches));
  std::vector<std::pair<int64_t, int64_t>> parts;
  for (int64_t j = 0, first = 0; j < m; ++j) {
    const int64_t count = rows / m + (j < rows % m ? 1 : 0);
    parts.emplace_back(first, count);
    first += count;
  }
  return parts;
}

DecodeStep next_decode_step(const torch::Tensor& idx_BT, const KVCache* cache, const DecodeOptions& options) {
  const int64_t T = idx_BT.size(1);
  const torch::Tensor window = T <= options.block_size ? idx_BT : idx_BT.slice(1, T - options.block_size);
  if (!cache) return {window, false};
  if (cache->length == 0 || cache->length + 1 > options.block_size) return {window, true};  // the window slid
  return {idx_BT.slice(1, -1), false};
}

torch::Tensor decode_tokens(torch::Tensor idx_BT, const DecodeOptions& options, const NextToken& next) {
  const auto parts = micro_batch_rows(idx_BT.size(0), options.micro_batches);
  std::vector<KVCache> caches(parts.size(), KVCache(options.n_layer));
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    std::vector<torch::Tensor> tokens;
    for (size_t j = 0; j < parts.size(); ++j) {
      KVCache* cache = options.use_cache ? &caches[j] : nullptr;
      const DecodeStep step = next_decode_step(idx_BT.narrow(0, parts[j].first, parts[j].second), cache, options);
      if (step.restart) cache->clear();  // positions start again at 0
      tokens.push_back(next(step.ids_BT, cache));
    }
    idx_BT = torch::cat({idx_BT, torch::cat(tokens, 0)}, 1);
  }
  return idx_BT;
}

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
  if (gen && gen->device().is_cpu()) probs_BV = probs_BV.to(torch::kCPU);
  return torch::multinomial(probs_BV, 1, /*replacement=*/false, gen).to(logits_BV.device());
}

}  // namespace hwt
