// tied_embedding_lookup and tied_head_weight (model/tied_embedding.h): the lookup, its sparse,
// row-exact backward, and the pairing that adds those rows into the head's gradient in place.
#include "hwtrain/model/tied_embedding.h"

#include <tuple>
#include <utility>

namespace hwt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

c10::intrusive_ptr<TiedGradientSlot> slot_of(AutogradContext* ctx) {
  const c10::IValue& v = ctx->saved_data["slot"];
  return v.isCapsule() ? c10::static_intrusive_pointer_cast<TiedGradientSlot>(v.toCapsule())
                       : c10::intrusive_ptr<TiedGradientSlot>();
}

class TiedEmbeddingLookup : public torch::autograd::Function<TiedEmbeddingLookup> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& idx, const torch::Tensor& weight,
                               c10::intrusive_ptr<TiedGradientSlot> slot) {
    ctx->save_for_backward({idx});
    ctx->saved_data["rows"] = weight.size(0);
    if (slot) ctx->saved_data["slot"] = c10::IValue::make_capsule(std::move(slot));
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
    const c10::intrusive_ptr<TiedGradientSlot> slot = slot_of(ctx);
    if (!slot) return {torch::Tensor(), sparse, torch::Tensor()};
    slot->lookup_done = true;
    torch::Tensor head = std::exchange(slot->head_grad, torch::Tensor());
    if (!head.defined()) return {torch::Tensor(), sparse, torch::Tensor()};
    // The same kernel autograd's dense + sparse sum runs, in place when nothing else holds the tensor.
    // Its storage may be shared with the base of the view the head's backward returned (the transpose
    // of a fresh product, which nothing else holds), so only the tensor's own count is checked: a head
    // whose gradient shared its storage with a live tensor would need the out-of-place sum.
    const bool own = head.use_count() == 1 && head.is_contiguous() && !torch::GradMode::is_enabled();
    return {torch::Tensor(), own ? head.add_(sparse) : head + sparse, torch::Tensor()};
  }
};

class TiedHeadWeight : public torch::autograd::Function<TiedHeadWeight> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& weight,
                               c10::intrusive_ptr<TiedGradientSlot> slot) {
    ctx->saved_data["slot"] = c10::IValue::make_capsule(std::move(slot));
    return weight.view_as(weight);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const c10::intrusive_ptr<TiedGradientSlot> slot = slot_of(ctx);
    torch::Tensor& grad = grads[0];
    if (!grad.defined() || slot->lookup_done || slot->lookup.expired() || torch::GradMode::is_enabled()) {
      return {grad, torch::Tensor()};
    }
    slot->head_grad = slot->head_grad.defined() ? slot->head_grad + grad : std::move(grad);
    return {torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor tied_embedding_lookup(const torch::Tensor& idx, const torch::Tensor& weight,
                                    c10::intrusive_ptr<TiedGradientSlot> slot) {
  torch::Tensor out = TiedEmbeddingLookup::apply(idx, weight, slot);
  if (slot) slot->lookup = out.grad_fn();  // none without a graph: the head then keeps its gradient
  return out;
}

torch::Tensor tied_head_weight(const torch::Tensor& weight, c10::intrusive_ptr<TiedGradientSlot> slot) {
  TORCH_CHECK(slot, "tied_head_weight needs the slot of its lookup");
  return TiedHeadWeight::apply(weight, std::move(slot));
}

}  // namespace hwt
