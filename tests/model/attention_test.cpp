// Attention: the SDPA and GEMM kernels against the math reference, and the causal mask cache.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "hwtrain/model/attention.h"
#include "hwtrain/model/gpt.h"
#include "model/model_test_util.h"

namespace hwt {
namespace {

using test::tiny_config;

// A whole model's logits and gradients with `kernel` equal those with the math path.
void expect_model_matches_math(AttentionKernel kernel) {
  torch::manual_seed(3);
  GPT model(tiny_config(), 64);
  auto idx_BT = torch::randint(64, {2, 16}, torch::kLong);
  auto targets_BT = torch::randint(64, {2, 16}, torch::kLong);

  model->set_attention_kernel(kernel);
  auto kernel_BTV = model(idx_BT);
  model->loss(kernel_BTV, targets_BT).backward();
  auto kernel_grads = test::grads_of(model);

  model->zero_grad();
  model->set_attention_kernel(AttentionKernel::Math);
  EXPECT_EQ(model->attention_kernel(), AttentionKernel::Math);
  auto math_BTV = model(idx_BT);
  model->loss(math_BTV, targets_BT).backward();
  auto math_grads = test::grads_of(model);

  EXPECT_LT((kernel_BTV - math_BTV).abs().max().item<double>(), 1e-5);
  EXPECT_LT(test::max_abs_diff(kernel_grads, math_grads), 1e-5);
  EXPECT_EQ(model->mask_cache().size(), 1);  // one length: one mask, built by math (and gemm)
}

TEST(Attention, SdpaMatchesMathOutputAndGradients) {
  expect_model_matches_math(AttentionKernel::Sdpa);
}

TEST(Attention, GemmMatchesMathOutputAndGradients) {
  expect_model_matches_math(AttentionKernel::Gemm);
  EXPECT_EQ(parse_attention_kernel("gemm"), AttentionKernel::Gemm);
  EXPECT_STREQ(to_string(AttentionKernel::Gemm), "gemm");
}

TEST(Attention, SdpaMatchesMathForOneModule) {
  torch::manual_seed(4);
  auto cache = std::make_shared<CausalMaskCache>();
  CausalSelfAttention attn(CausalSelfAttentionOptions{48, 3, 0.0, true}, cache);
  auto x_BTC = torch::randn({3, 11, 48});
  auto sdpa_BTC = attn(x_BTC);
  attn->set_kernel(AttentionKernel::Math);
  auto math_BTC = attn(x_BTC);
  EXPECT_LT((sdpa_BTC - math_BTC).abs().max().item<double>(), 1e-5);
}

TEST(Attention, MaskCacheBuildsOncePerLengthAndClears) {
  torch::manual_seed(0);
  GPT model(tiny_config(3), 64, AttentionKernel::Math);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto& cache = model->mask_cache();
  EXPECT_EQ(cache.size(), 0);

  model(torch::randint(64, {1, 8}, torch::kLong));  // three blocks share one mask
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(cache.num_builds(), 1);
  model(torch::randint(64, {2, 8}, torch::kLong));
  EXPECT_EQ(cache.num_builds(), 1);
  model(torch::randint(64, {1, 5}, torch::kLong));
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(cache.num_builds(), 2);

  model->clear_mask_cache();
  EXPECT_EQ(cache.size(), 0);
  model(torch::randint(64, {1, 8}, torch::kLong));
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(cache.num_builds(), 3);

  model->set_attention_kernel(AttentionKernel::Sdpa);
  model(torch::randint(64, {1, 12}, torch::kLong));
  EXPECT_EQ(cache.size(), 1);  // the fused kernel needs no mask
}

TEST(Attention, MaskHidesTheFuture) {
  CausalMaskCache cache;
  auto future_TT = cache.future_mask(4, torch::kCPU);
  auto expected_TT = torch::tensor({0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}).view({4, 4});
  EXPECT_TRUE(future_TT.to(torch::kLong).equal(expected_TT));
  EXPECT_TRUE(cache.future_mask(4, torch::kCPU).is_same(future_TT));  // the cached tensor
}

}  // namespace
}  // namespace hwt
