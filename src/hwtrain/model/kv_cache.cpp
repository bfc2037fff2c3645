#include "hwtrain/model/kv_cache.h"

namespace hwt {

void LayerKV::append(const torch::Tensor& k_BKTD, const torch::Tensor& v_BKTD) {
  k_BKLD = k_BKLD.defined() ? torch::cat({k_BKLD, k_BKTD}, 2) : k_BKTD;
  v_BKLD = v_BKLD.defined() ? torch::cat({v_BKLD, v_BKTD}, 2) : v_BKTD;
}

torch::Tensor cached_attention(const torch::Tensor& q_BHTD, const torch::Tensor& k_BKLD, const torch::Tensor& v_BKLD) {
  const int64_t T = q_BHTD.size(2), L = k_BKLD.size(2);
  const bool gqa = k_BKLD.size(1) != q_BHTD.size(1);
  if (T == 1 || T == L) {  // one new position sees everything; or nothing was cached: plain causal
    return at::scaled_dot_product_attention(q_BHTD, k_BKLD, v_BKLD, /*attn_mask=*/{}, 0.0, /*is_causal=*/T == L && T > 1,
                                            std::nullopt, gqa);
  }
  // True = may attend: new position i sees keys up to L - T + i.
  const auto allowed_TL = torch::ones({T, L}, q_BHTD.options().dtype(torch::kBool)).tril(L - T);
  return at::scaled_dot_product_attention(q_BHTD, k_BKLD, v_BKLD, allowed_TL, 0.0, false, std::nullopt, gqa);
}

}  // namespace hwt
