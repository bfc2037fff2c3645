// tied_embedding_lookup (model/tied_embedding.h): the lookup and its sparse, row-exact backward.
#include "hwtrain/model/tied_embedding.h"

#include <tuple>

namespace hwt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class TiedEmbeddingLookup : public torch::autograd::Function<TiedEmbeddingLookup> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& idx, const torch::Tensor& weight) {
    ctx->save_for_backward({idx});
    ctx->saved_data["rows"] = weight.size(0);
    return torch::embedding(weight, idx);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const torch::Tensor idx = ctx->get_saved_variables()[0];
    const torch::Tensor& grad = grads[0];
    // The batch's distinct ids in ascending order, and each id's position among them.
    auto [rows, renumbered] = at::_unique(idx.reshape({-1}), /*sorted=*/true, /*return_inverse=*/true);
    // The dense backward's own kernel over those positions: the same sums, row for row.
    torch::Tensor sums = at::embedding_dense_backward(grad, renumbered.view(idx.sizes()), rows.numel(),
                                                      /*padding_idx=*/-1, /*scale_grad_by_freq=*/false);
    const int64_t vocab = ctx->saved_data["rows"].toInt();
    torch::Tensor sparse = at::_sparse_coo_tensor_unsafe(rows.unsqueeze(0), sums, {vocab, grad.size(-1)},
                                                         sums.options().layout(torch::kSparse),
                                                         /*is_coalesced=*/true);
    return {torch::Tensor(), sparse};
  }
};

}  // namespace

torch::Tensor tied_embedding_lookup(const torch::Tensor& idx, const torch::Tensor& weight) {
  return TiedEmbeddingLookup::apply(idx, weight);
}

}  // namespace hwt
