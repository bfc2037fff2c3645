// The GEMM attention kernel against the math reference: values and gradients in fp32 for several
// chunkings (one chunk, even chunks, a short last chunk), and bf16 under autocast (the whole model
// with it: tests/model/attention_test.cpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "hwtrain/model/attention.h"
#include "hwtrain/model/gemm_attention.h"
#include "hwtrain/model/autocast_state.h"

namespace hwt {
namespace {

torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(2);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(3)));
  scores = scores.masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

struct Qkv {
  torch::Tensor q, k, v;
};
// Strided like the model's: (B, T, H, D) transposed to (B, H, T, D).
Qkv random_qkv(int64_t B, int64_t H, int64_t T, int64_t D) {
  auto make = [&] { return torch::randn({B, T, H, D}).transpose(1, 2).detach().requires_grad_(); };
  return {make(), make(), make()};
}

void expect_matches_reference(int64_t T, int64_t chunk_rows) {
  SCOPED_TRACE("T = " + std::to_string(T) + ", chunk_rows = " + std::to_string(chunk_rows));
  torch::manual_seed(7);
  auto a = random_qkv(2, 3, T, 8);
  auto b = Qkv{a.q.detach().clone().requires_grad_(), a.k.detach().clone().requires_grad_(),
               a.v.detach().clone().requires_grad_()};
  CausalMaskCache masks;
  auto out = gemm_causal_attention(a.q, a.k, a.v, masks.future_mask(T, torch::kCPU), chunk_rows);
  auto expected = reference_attention(b.q, b.k, b.v);
  EXPECT_LT((out - expected).abs().max().item<double>(), 1e-5);
  auto grad = torch::randn_like(expected);
  out.backward(grad);
  expected.backward(grad);
  EXPECT_LT((a.q.grad() - b.q.grad()).abs().max().item<double>(), 1e-5);
  EXPECT_LT((a.k.grad() - b.k.grad()).abs().max().item<double>(), 1e-5);
  EXPECT_LT((a.v.grad() - b.v.grad()).abs().max().item<double>(), 1e-5);
}

TEST(GemmAttention, MatchesReferenceInOneChunk) { expect_matches_reference(12, 64); }
TEST(GemmAttention, MatchesReferenceInEvenChunks) { expect_matches_reference(16, 4); }
TEST(GemmAttention, MatchesReferenceWithAShortLastChunk) { expect_matches_reference(13, 5); }
TEST(GemmAttention, MatchesReferenceInChunksOfOneRow) { expect_matches_reference(6, 1); }

TEST(GemmAttention, Bf16UnderAutocastIsCloseToFp32) {
  torch::manual_seed(8);
  auto a = random_qkv(2, 2, 32, 16);
  CausalMaskCache masks;
  auto expected = reference_attention(a.q, a.k, a.v);
  torch::Tensor out;
  {
    AutocastState bf16;
    bf16.cpu_enabled = true;
    bf16.cpu_dtype = torch::kBFloat16;
    AutocastStateGuard autocast(bf16);
    out = gemm_causal_attention(a.q, a.k, a.v, masks.future_mask(32, torch::kCPU), 8);
  }
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  EXPECT_LT((out.to(torch::kFloat) - expected).abs().max().item<double>(), 0.05);
  out.backward(torch::ones_like(out));
  EXPECT_EQ(a.q.grad().scalar_type(), torch::kFloat);  // back through the cast to the fp32 input
  EXPECT_TRUE(torch::isfinite(a.q.grad()).all().item<bool>());
}

TEST(GemmAttention, KeptProbabilitiesSkipTheBlocksAboveTheDiagonal) {
  EXPECT_EQ(gemm_attention_kept_probabilities(256, 64), 64 * (64 + 128 + 192 + 256));  // 5/8 of 256^2
  EXPECT_EQ(gemm_attention_kept_probabilities(10, 64), 100);
  EXPECT_EQ(gemm_attention_kept_probabilities(5, 2), 2 * 2 + 2 * 4 + 1 * 5);
}

}  // namespace
}  // namespace hwt
