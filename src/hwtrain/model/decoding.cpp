#include "hwtrain/model/decoding.h"

#include <limits>

namespace hwt {

void check_decode_arguments(const torch::Tensor& idx_BT, int64_t max_new_tokens, double temperature, double top_p) {
  TORCH_CHECK(idx_BT.dim() == 2 && idx_BT.size(1) > 0, "GPT::generate expects a non-empty prompt (B, T), got ",
              idx_BT.sizes());
  TORCH_CHECK(max_new_tokens >= 0, "GPT::generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  TORCH_CHECK(temperature >= 0.0, "GPT::generate: temperature must be >= 0, got ", temperature);
  TORCH_CHECK(top_p > 0.0 && top_p <= 1.0, "GPT::generate: top_p must be in (0, 1], got ", top_p);
}

torch::Tensor decode_tokens(torch::Tensor idx_BT, const DecodeOptions& options, const NextToken& next) {
  auto window = [&] {
    const int64_t T = idx_BT.size(1);
    return T <= options.block_size ? idx_BT : idx_BT.slice(1, T - options.block_size);
  };
  KVCache cache(options.n_layer);
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    torch::Tensor next_B1;
    if (!options.use_cache) {
      next_B1 = next(window(), nullptr);
    } else if (cache.length == 0 || cache.length + 1 > options.block_size) {
      cache.clear();  // the first window, or the window slid: positions start again at 0
      next_B1 = next(window(), &cache);
    } else {
      next_B1 = next(idx_BT.slice(1, -1), &cache);
    }
    idx_BT = torch::cat({idx_BT, next_B1}, 1);
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
