// KVCache: the keys and values of the positions a decoder has seen, per layer, so that generating
// a token runs the model on that token alone instead of the whole prefix. cached_attention is the
// attention of the newest positions' queries over everything cached (causal among the new ones).
//
// Shape letters: B batch, H query heads, K key/value heads, T new positions, L cached positions
// (the new ones included), D head size.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace hwt {

struct LayerKV {
  torch::Tensor k_BKLD, v_BKLD;  // undefined until the first positions arrive
  // Appends the new positions' keys and values (B, K, T, D).
  void append(const torch::Tensor& k_BKTD, const torch::Tensor& v_BKTD);
};

struct KVCache {
  std::vector<LayerKV> layers;
  int64_t length = 0;  // positions cached
  explicit KVCache(int64_t n_layer) : layers(static_cast<size_t>(n_layer)) {}
  void clear() {
    for (auto& l : layers) l = LayerKV{};
    length = 0;
  }
};

// softmax(q k^T / sqrt(D)) v for the T newest positions q (B, H, T, D) over k, v (B, K, L, D),
// position i of the new ones seeing keys 0 .. L - T + i. enable_gqa: K divides H.
torch::Tensor cached_attention(const torch::Tensor& q_BHTD, const torch::Tensor& k_BKLD, const torch::Tensor& v_BKLD);

}  // namespace hwt
