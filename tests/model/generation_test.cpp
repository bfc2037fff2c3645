// Generation: the KV-cache path gives the logits and greedy tokens of recomputing the window, in
// both families, also after the window slides past block_size; nucleus sampling with a tiny top_p
// is greedy; a seeded CPU generator repeats its samples.
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

INSTANTIATE_TEST_SUITE_P(Families, Generation, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "llama" : "gpt2"; });

}  // namespace
}  // namespace hwt
