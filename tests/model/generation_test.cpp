// Generation: the KV-cache path gives the logits and greedy tokens of recomputing the window, in
// both families, also after the window slides past block_size; nucleus sampling with a tiny top_p
// is greedy; top-k and top-p draw only among the tokens they keep; a seeded CPU generator repeats
// its samples.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include "hwtrain/model/gpt.h"

namespace hwt {
namespace {

ModelConfig config(bool llama) {
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 32;
  c.block_size = 16;
  if (llama) {
    c.architecture = Architecture::kLlama;
    c.n_kv_head = 2;
  }
  return c;
}

class Generation : public ::testing::TestWithParam<bool> {};

TEST_P(Generation, CachedLogitsEqualTheFullForward) {
  torch::manual_seed(5);
  GPT model(config(GetParam()), 64);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto idx = torch::randint(64, {2, 12});
  const auto full = model->forward(idx);
  KVCache cache(2);
  std::vector<torch::Tensor> parts{model->forward_cached(idx.slice(1, 0, 5), cache)};
  parts.push_back(model->forward_cached(idx.slice(1, 5, 8), cache));  // several new positions at once
  for (int64_t t = 8; t < 12; ++t) parts.push_back(model->forward_cached(idx.slice(1, t, t + 1), cache));
  EXPECT_EQ(cache.length, 12);
  EXPECT_LT((torch::cat(parts, 1) - full).abs().max().item<double>(), 1e-5);
  EXPECT_THROW(model->forward_cached(idx.slice(1, 0, 5), cache), c10::Error);  // 17 > block_size
}

TEST_P(Generation, GreedyTokensAreTheSameWithAndWithoutTheCache) {
  torch::manual_seed(6);
  GPT model(config(GetParam()), 64);
  const auto prompt = torch::randint(64, {2, 5});
  const auto cached = model->generate(prompt, 30, 0.0, 0, std::nullopt, 1.0, true);  // slides past 16
  const auto recomputed = model->generate(prompt, 30, 0.0, 0, std::nullopt, 1.0, false);
  EXPECT_TRUE(torch::equal(cached, recomputed));
  EXPECT_EQ(cached.size(1), 35);
  EXPECT_TRUE(model->is_training());  // the mode is restored
}

TEST_P(Generation, TinyTopPIsGreedyAndSeededSamplesRepeat) {
  torch::manual_seed(7);
  GPT model(config(GetParam()), 64);
  const auto prompt = torch::randint(64, {1, 4});
  const auto greedy = model->generate(prompt, 10, 0.0);
  const auto nucleus = model->generate(prompt, 10, 1.0, 0, at::make_generator<at::CPUGeneratorImpl>(1), 1e-9);
  EXPECT_TRUE(torch::equal(greedy, nucleus));
  const auto a = model->generate(prompt, 10, 1.0, 10, at::make_generator<at::CPUGeneratorImpl>(3), 0.9);
  const auto b = model->generate(prompt, 10, 1.0, 10, at::make_generator<at::CPUGeneratorImpl>(3), 0.9);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_THROW(model->generate(prompt, 1, 1.0, 0, std::nullopt, 0.0), c10::Error);
}

// top-k samples only among the k most likely tokens (and, at a high temperature, all of them);
// without it the same draws spread wider; top-p 0.5 keeps only the tokens that reach half the mass.
TEST_P(Generation, TopKAndTopPLimitTheChoice) {
  torch::manual_seed(8);
  GPT model(config(GetParam()), 64);
  const auto prompt = torch::randint(64, {1, 4}).expand({400, 4}).contiguous();
  torch::Tensor probs;
  {
    torch::NoGradGuard no_grad;
    model->eval();
    probs = torch::softmax(model->forward(prompt.slice(0, 0, 1)).select(1, -1).squeeze(0) / 5.0, -1);
    model->train();
  }
  const auto top3 = std::get<1>(probs.topk(3));
  auto drawn = [&](int64_t k, double p) {
    const auto out = model->generate(prompt, 1, 5.0, k, at::make_generator<at::CPUGeneratorImpl>(9), p);
    return std::get<0>(at::_unique(out.select(1, -1)));
  };
  const auto k3 = drawn(3, 1.0);
  EXPECT_EQ(k3.numel(), 3);
  EXPECT_TRUE(torch::isin(k3, top3).all().item<bool>()) << k3 << top3;
  EXPECT_GT(drawn(0, 1.0).numel(), 3);
  // top-p: the least set of most likely tokens whose mass reaches 0.5
  const auto sorted = std::get<0>(probs.sort(-1, /*descending=*/true));
  const int64_t nucleus = (sorted.cumsum(-1) - sorted < 0.5).sum().item<int64_t>();
  const auto p_half = drawn(0, 0.5);
  EXPECT_LE(p_half.numel(), nucleus);
  EXPECT_TRUE(torch::isin(p_half, std::get<1>(probs.topk(nucleus))).all().item<bool>());
}

INSTANTIATE_TEST_SUITE_P(Families, Generation, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "llama" : "gpt2"; });

}  // namespace
}  // namespace hwt
