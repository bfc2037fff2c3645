// Fused LM head + cross-entropy, chunked over tokens, gradients computed in the forward pass.
#include "hwtrain/model/lm_head_loss.h"

#include <algorithm>

#include "hwtrain/model/autocast_state.h"

namespace hwt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kLogitsPerChunk = int64_t{8} << 20;
constexpr int64_t kMinChunkTokens = 64;

at::ScalarType default_compute_dtype(const torch::Device& device) {
  const auto s = AutocastState::current();
  if (device.is_cpu() && s.cpu_enabled) return s.cpu_dtype;
  if (device.is_cuda() && s.cuda_enabled) return s.cuda_dtype;
  return at::kFloat;
}

// Sum of the losses over valid targets; with grad_x / grad_w defined, also their unnormalized
// gradients (d sum / d x, d sum / d W: rows of softmax - one-hot, zero for ignored targets).
// Runs with autocast off: every dtype here is chosen explicitly.
torch::Tensor chunked_loss_sum(const torch::Tensor& x_NC, const torch::Tensor& weight_VC,
                               const torch::Tensor& targets_N, int64_t chunk_tokens,
                               at::ScalarType compute, torch::Tensor* grad_x_NC,
                               torch::Tensor* grad_w_VC_fp32) {
  const int64_t N = x_NC.size(0);
  const auto w_VC = weight_VC.to(compute);
  auto loss_sum = torch::zeros({}, x_NC.options().dtype(torch::kFloat));
  for (int64_t start = 0; start < N; start += chunk_tokens) {
    const int64_t n = std::min(chunk_tokens, N - start);
    const auto xs_nC = x_NC.narrow(0, start, n).to(compute);
    const auto ts_n = targets_N.narrow(0, start, n);
    const auto valid_n = ts_n.ne(-1);
    const auto safe_n1 = ts_n.clamp_min(0).unsqueeze(1);

    auto probs_nV = torch::mm(xs_nC, w_VC.t()).to(torch::kFloat);  // logits, then softmax in place
    const auto picked_n = probs_nV.gather(1, safe_n1).squeeze(1);
    const auto max_n1 = std::get<0>(probs_nV.max(1, /*keepdim=*/true));
    probs_nV.sub_(max_n1).exp_();
    const auto sumexp_n1 = probs_nV.sum(1, /*keepdim=*/true);
    const auto lse_n = (sumexp_n1.log() + max_n1).squeeze(1);
    loss_sum.add_(((lse_n - picked_n) * valid_n).sum());
    if (grad_x_NC == nullptr && grad_w_VC_fp32 == nullptr) continue;

    probs_nV.div_(sumexp_n1);
    probs_nV.scatter_add_(1, safe_n1, -valid_n.to(torch::kFloat).unsqueeze(1));
    probs_nV.mul_(valid_n.unsqueeze(1));
    const auto dlogits_nV = probs_nV.to(compute);
    if (grad_x_NC != nullptr) grad_x_NC->narrow(0, start, n).copy_(torch::mm(dlogits_nV, w_VC));
    if (grad_w_VC_fp32 != nullptr) grad_w_VC_fp32->add_(torch::mm(dlogits_nV.t(), xs_nC));
  }
  return loss_sum;
}

struct FusedLmHeadLoss : public torch::autograd::Function<FusedLmHeadLoss> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_NC,
                               const torch::Tensor& weight_VC, const torch::Tensor& targets_N,
                               int64_t chunk_tokens, at::ScalarType compute) {
    AutocastStateGuard autocast_off(AutocastState{});
    torch::Tensor grad_x, grad_w;
    if (x_NC.requires_grad()) grad_x = torch::empty_like(x_NC);
    if (weight_VC.requires_grad()) grad_w = torch::zeros_like(weight_VC, weight_VC.options().dtype(torch::kFloat));
    auto loss_sum = chunked_loss_sum(x_NC, weight_VC, targets_N, chunk_tokens, compute,
                                     grad_x.defined() ? &grad_x : nullptr,
                                     grad_w.defined() ? &grad_w : nullptr);
    // Mean over valid targets (NaN when there are none, as cross_entropy gives).
    const auto inv_count = targets_N.ne(-1).sum().to(torch::kFloat).reciprocal();
    if (grad_x.defined()) grad_x.mul_(inv_count);
    if (grad_w.defined()) {
      grad_w.mul_(inv_count);
      if (grad_w.scalar_type() != weight_VC.scalar_type()) grad_w = grad_w.to(weight_VC.scalar_type());
    }
    ctx->saved_data["grad_x"] = grad_x;
    ctx->saved_data["grad_w"] = grad_w;
    return loss_sum * inv_count;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    // Taken out of the context, so the buffers become the gradients autograd accumulates.
    auto take = [ctx](const char* key) {
      auto& slot = ctx->saved_data[key];
      torch::Tensor t = slot.isTensor() ? slot.toTensor() : torch::Tensor();
      slot = c10::IValue();
      return t;
    };
    auto grad_x = take("grad_x");
    auto grad_w = take("grad_w");
    const auto& g = grad_outputs[0];
    if (g.defined()) {
      if (grad_x.defined()) grad_x.mul_(g.to(grad_x.scalar_type()));
      if (grad_w.defined()) grad_w.mul_(g.to(grad_w.scalar_type()));
    }
    return {grad_x, grad_w, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

int64_t lm_head_loss_chunk_tokens(int64_t vocab_size) {
  return std::max(kMinChunkTokens, kLogitsPerChunk / std::max<int64_t>(1, vocab_size));
}

torch::Tensor fused_lm_head_loss(const torch::Tensor& x_NC, const torch::Tensor& weight_VC,
                                 const torch::Tensor& targets_N, int64_t chunk_tokens,
                                 std::optional<at::ScalarType> compute_dtype) {
  TORCH_CHECK(x_NC.dim() == 2 && weight_VC.dim() == 2 && x_NC.size(1) == weight_VC.size(1),
              "fused_lm_head_loss: x (N, C) and weight (V, C) expected, got ", x_NC.sizes(), " and ",
              weight_VC.sizes());
  TORCH_CHECK(targets_N.dim() == 1 && targets_N.size(0) == x_NC.size(0) &&
                  targets_N.scalar_type() == torch::kLong,
              "fused_lm_head_loss: int64 targets (N) expected, got ", targets_N.sizes(), " ",
              targets_N.scalar_type());
  const int64_t chunk = chunk_tokens > 0 ? chunk_tokens : lm_head_loss_chunk_tokens(weight_VC.size(0));
  const at::ScalarType compute = compute_dtype ? *compute_dtype : default_compute_dtype(x_NC.device());
  if (torch::GradMode::is_enabled() && (x_NC.requires_grad() || weight_VC.requires_grad())) {
    return FusedLmHeadLoss::apply(x_NC, weight_VC, targets_N, chunk, compute);
  }
  AutocastStateGuard autocast_off(AutocastState{});
  const auto count = targets_N.ne(-1).sum().to(torch::kFloat);
  return chunked_loss_sum(x_NC, weight_VC, targets_N, chunk, compute, nullptr, nullptr) / count;
}

}  // namespace hwt
