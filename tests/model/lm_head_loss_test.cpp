// Fused chunked LM head + cross-entropy: loss and gradients equal the plain linear + cross_entropy
// in fp32 (chunks that do not divide the tokens, ignored targets, a scaled loss), agree under
// bf16 autocast, need no gradient without grad mode, and GPT::forward_loss gives the same loss
// and gradients with the fused head as without.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/autocast_mode.h>

#include "hwtrain/model/gpt.h"
#include "hwtrain/model/lm_head_loss.h"
#include "model/model_test_util.h"

namespace hwt {
namespace {

struct Inputs {
  torch::Tensor x_NC, w_VC, targets_N;
};

Inputs make_inputs(int64_t N, int64_t C, int64_t V, bool with_ignored) {
  auto gen = at::detail::createCPUGenerator(5);
  Inputs in;
  in.x_NC = torch::randn({N, C}, gen).requires_grad_(true);
  in.w_VC = (0.5 * torch::randn({V, C}, gen)).requires_grad_(true);
  in.targets_N = torch::randint(V, {N}, gen, torch::kLong);
  if (with_ignored) in.targets_N.index_put_({torch::indexing::Slice(0, N, 3)}, -1);
  return in;
}

torch::Tensor reference_loss(const Inputs& in) {
  return torch::nn::functional::cross_entropy(
      torch::mm(in.x_NC, in.w_VC.t()), in.targets_N,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1));
}

struct LossAndGrads {
  double loss;
  torch::Tensor grad_x, grad_w;
};

template <class Fn>
LossAndGrads run(const Inputs& in, Fn loss_fn, double scale = 1.0) {
  in.x_NC.mutable_grad() = torch::Tensor();
  in.w_VC.mutable_grad() = torch::Tensor();
  auto loss = loss_fn(in);
  (loss * scale).backward();
  return {loss.template item<double>(), in.x_NC.grad().clone(), in.w_VC.grad().clone()};
}

TEST(FusedLmHeadLoss, MatchesLinearPlusCrossEntropyInFp32) {
  for (bool ignored : {false, true}) {
    for (int64_t chunk : {7, 16, 1000}) {  // 7 does not divide 40; 1000 = one chunk
      const auto in = make_inputs(40, 12, 33, ignored);
      const auto expected = run(in, reference_loss, 3.0);
      const auto got =
          run(in, [&](const Inputs& i) { return fused_lm_head_loss(i.x_NC, i.w_VC, i.targets_N, chunk); }, 3.0);
      SCOPED_TRACE(std::string("ignored ") + (ignored ? "yes" : "no") + ", chunk " + std::to_string(chunk));
      EXPECT_NEAR(got.loss, expected.loss, 1e-5);
      EXPECT_TRUE(torch::allclose(got.grad_x, expected.grad_x, 1e-5, 1e-6));
      EXPECT_TRUE(torch::allclose(got.grad_w, expected.grad_w, 1e-5, 1e-6));
    }
  }
}

TEST(FusedLmHeadLoss, AgreesUnderBf16Autocast) {
  const auto in = make_inputs(64, 32, 50, true);
  auto under_autocast = [](auto fn) {
    return [fn](const Inputs& i) {
      at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
      at::autocast::set_autocast_enabled(at::kCPU, true);
      auto loss = fn(i);
      at::autocast::set_autocast_enabled(at::kCPU, false);
      at::autocast::clear_cache();
      return loss;
    };
  };
  const auto expected = run(in, under_autocast(reference_loss));
  const auto got = run(in, under_autocast([](const Inputs& i) {
                         return fused_lm_head_loss(i.x_NC, i.w_VC, i.targets_N, 16);
                       }));
  EXPECT_NEAR(got.loss, expected.loss, 2e-2 * std::abs(expected.loss));
  EXPECT_EQ(got.grad_w.scalar_type(), torch::kFloat);  // master weights keep fp32 gradients
  EXPECT_TRUE(torch::allclose(got.grad_x, expected.grad_x, 5e-2, 2e-3));
  EXPECT_TRUE(torch::allclose(got.grad_w, expected.grad_w, 5e-2, 2e-3));
}

TEST(FusedLmHeadLoss, WithoutGradModeGivesTheLossAndNoGraph) {
  const auto in = make_inputs(20, 8, 17, true);
  const double expected = reference_loss(in).item<double>();
  torch::NoGradGuard no_grad;
  auto loss = fused_lm_head_loss(in.x_NC, in.w_VC, in.targets_N, 6);
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_NEAR(loss.item<double>(), expected, 1e-5);
}

TEST(FusedLmHeadLoss, RejectsMismatchedShapes) {
  const auto in = make_inputs(10, 8, 17, false);
  EXPECT_THROW(fused_lm_head_loss(in.x_NC, in.w_VC.narrow(1, 0, 4), in.targets_N), c10::Error);
  EXPECT_THROW(fused_lm_head_loss(in.x_NC, in.w_VC, in.targets_N.narrow(0, 0, 5)), c10::Error);
}

TEST(FusedLmHeadLoss, ChunkSizeFollowsTheVocabulary) {
  EXPECT_EQ(lm_head_loss_chunk_tokens(257), (int64_t{8} << 20) / 257);
  EXPECT_EQ(lm_head_loss_chunk_tokens(50257), 166);
  EXPECT_EQ(lm_head_loss_chunk_tokens(int64_t{1} << 30), 64);
}

void expect_fused_head_equal(const ModelConfig& config) {
  auto idx_BT = torch::randint(64, {3, 16}, at::detail::createCPUGenerator(11), torch::kLong);
  auto targets_BT = torch::randint(64, {3, 16}, at::detail::createCPUGenerator(12), torch::kLong);
  std::vector<std::vector<torch::Tensor>> grads;
  std::vector<double> losses;
  for (bool fused : {false, true}) {
    torch::manual_seed(3);
    GPT model(config, 64);
    model->set_fused_lm_head_loss(fused);
    auto loss = model->forward_loss(idx_BT, targets_BT);
    loss.backward();
    losses.push_back(loss.item<double>());
    grads.emplace_back();
    for (const auto& p : model->parameters()) grads.back().push_back(p.grad().clone());
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-5);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], 1e-4, 1e-6))
        << (config.architecture == Architecture::kLlama ? "llama" : "gpt2") << " parameter " << i;
  }
}

// Both families: GPT-2's tied head and Llama's untied one (GQA, no biases).
TEST(GptForwardLoss, FusedHeadGivesTheSameLossAndGradients) {
  ModelConfig llama = test::tiny_config();
  llama.architecture = Architecture::kLlama;
  llama.n_kv_head = 2;
  llama.bias = false;
  llama.tie_word_embeddings = false;
  for (const ModelConfig& config : {test::tiny_config(), llama}) {
    expect_fused_head_equal(config);
  }
}

}  // namespace
}  // namespace hwt
