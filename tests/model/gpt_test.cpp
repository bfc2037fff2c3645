// GPT: shapes, parameter count, causality, init, loss, overfitting one batch, weight-decay groups,
// generation and config validation.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <unordered_set>

#include "hwtrain/core/error.h"
#include "hwtrain/model/gpt.h"
#include "model/model_test_util.h"

namespace hwt {
namespace {

using test::tiny_config;

TEST(Gpt, ForwardShapesAndLoss) {
  torch::manual_seed(0);
  GPT model(tiny_config(), 64);
  auto idx_BT = torch::randint(64, {3, 10}, torch::kLong);
  auto logits_BTV = model(idx_BT);
  EXPECT_EQ(logits_BTV.sizes(), (std::vector<int64_t>{3, 10, 64}));
  EXPECT_EQ(logits_BTV.scalar_type(), torch::kFloat);
  auto loss = model->loss(logits_BTV, torch::randint(64, {3, 10}, torch::kLong));
  EXPECT_EQ(loss.dim(), 0);
  // Small init: predictions start near uniform, so the loss is near ln(V).
  EXPECT_NEAR(loss.item<double>(), std::log(64.0), 0.3);
}

TEST(Gpt, LossIgnoresMinusOneTargets) {
  torch::manual_seed(0);
  GPT model(tiny_config(), 64);
  auto idx_BT = torch::randint(64, {2, 8}, torch::kLong);
  auto targets_BT = torch::randint(64, {2, 8}, torch::kLong);
  auto logits_BTV = model(idx_BT);
  auto masked = targets_BT.clone();
  masked.slice(1, 4).fill_(-1);
  auto expected = model->loss(logits_BTV.slice(1, 0, 4).contiguous(),
                              targets_BT.slice(1, 0, 4).contiguous());
  EXPECT_NEAR(model->loss(logits_BTV, masked).item<double>(), expected.item<double>(), 1e-6);
}

TEST(Gpt, RejectsSequencesLongerThanBlockSize) {
  GPT model(tiny_config(), 64);
  EXPECT_THROW(model(torch::zeros({1, 17}, torch::kLong)), c10::Error);
}

TEST(Gpt, Gpt2ParameterCount) {
  ModelConfig cfg;
  const auto& shape = model_presets().at("gpt2");
  cfg.n_layer = shape.n_layer;
  cfg.n_head = shape.n_head;
  cfg.n_embd = shape.n_embd;
  cfg.block_size = shape.block_size;
  const int64_t V = 50257, C = 768, L = 12, block = 1024;
  // Per block: two LayerNorms (2C each), qkv (C*3C + 3C), out-proj (C*C + C), MLP up (C*4C + 4C)
  // and down (4C*C + C); plus token and position embeddings and the final LayerNorm.
  const int64_t per_block = 2 * 2 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) +
                            (4 * C * C + C);
  const int64_t with_pos = V * C + block * C + L * per_block + 2 * C;
  EXPECT_EQ(with_pos, 124439808);  // GPT-2 "124M"
  EXPECT_EQ(GPTImpl::count_parameters(cfg, V, /*exclude_position_embedding=*/false), with_pos);
  EXPECT_EQ(GPTImpl::count_parameters(cfg, V), with_pos - block * C);  // nanoGPT's 123.65M

  GPT model(cfg, V);
  EXPECT_EQ(model->num_parameters(/*exclude_position_embedding=*/false), with_pos);
  EXPECT_EQ(model->num_parameters(), with_pos - block * C);
}

TEST(Gpt, ParameterCountMatchesFormulaWithoutBias) {
  auto cfg = tiny_config(3);
  cfg.bias = false;
  GPT model(cfg, 50);
  EXPECT_EQ(model->num_parameters(false), GPTImpl::count_parameters(cfg, 50, false));
  cfg.bias = true;
  EXPECT_GT(GPTImpl::count_parameters(cfg, 50, false), model->num_parameters(false));
}

TEST(Gpt, Gpt2Initialization) {
  torch::manual_seed(0);
  auto cfg = tiny_config(8);
  cfg.n_embd = 128;
  cfg.n_head = 4;
  GPT model(cfg, 512);
  EXPECT_NEAR(model->wte->weight.std().item<double>(), 0.02, 0.001);
  auto block = model->h->ptr<BlockImpl>(0);
  EXPECT_NEAR(block->attn->c_attn->weight.std().item<double>(), 0.02, 0.001);
  const double residual = 0.02 / std::sqrt(2.0 * 8);
  EXPECT_NEAR(block->attn->c_proj->weight.std().item<double>(), residual, 0.0005);
  EXPECT_NEAR(block->mlp->c_proj->weight.std().item<double>(), residual, 0.0005);
  EXPECT_EQ(block->mlp->c_fc->bias.abs().max().item<float>(), 0.0f);
  EXPECT_EQ(block->ln_1->weight.min().item<float>(), 1.0f);
}

TEST(Gpt, TiedHeadSharesTheTokenEmbedding) {
  torch::manual_seed(0);
  GPT model(tiny_config(), 64);
  auto idx_BT = torch::randint(64, {1, 4}, torch::kLong);
  model->loss(model(idx_BT), idx_BT).backward();
  // The embedding gets gradient from the head for every vocabulary row, not only the input rows.
  auto row_has_grad_V = model->wte->weight.grad().abs().sum(1) > 0;
  EXPECT_EQ(row_has_grad_V.sum().item<int64_t>(), 64);
}

void expect_causal(AttentionKernel kernel) {
  torch::manual_seed(1);
  GPT model(tiny_config(), 64, kernel);
  model->eval();
  torch::NoGradGuard no_grad;
  auto idx_BT = torch::randint(64, {2, 16}, torch::kLong);
  auto logits_BTV = model(idx_BT);
  for (int64_t t : {0, 7, 14}) {
    auto changed_BT = idx_BT.clone();
    changed_BT.slice(1, t + 1).copy_((changed_BT.slice(1, t + 1) + 1) % 64);
    auto changed_logits_BTV = model(changed_BT);
    EXPECT_TRUE(torch::allclose(logits_BTV.slice(1, 0, t + 1), changed_logits_BTV.slice(1, 0, t + 1),
                                /*rtol=*/0, /*atol=*/1e-6))
        << to_string(kernel) << ": logits at <= " << t << " depend on later tokens";
    // The later positions do see the change, so the comparison above is not vacuous.
    EXPECT_FALSE(torch::allclose(logits_BTV.slice(1, t + 1), changed_logits_BTV.slice(1, t + 1)));
  }
}

TEST(Gpt, CausalWithSdpa) { expect_causal(AttentionKernel::Sdpa); }
TEST(Gpt, CausalWithMath) { expect_causal(AttentionKernel::Math); }

TEST(Gpt, OverfitsOneBatch) {
  torch::manual_seed(0);
  GPT model(tiny_config(), 32);
  auto idx_BT = torch::randint(32, {4, 16}, torch::kLong);
  auto targets_BT = torch::randint(32, {4, 16}, torch::kLong);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 150; ++step) {
    optimizer.zero_grad();
    auto loss = model->loss(model(idx_BT), targets_BT);
    loss.backward();
    optimizer.step();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  EXPECT_GT(first, 3.0);  // ~ln 32 at init
  EXPECT_LT(last, 0.1);   // memorized 64 random targets
}

TEST(Gpt, DecayGroupsCoverEveryParameterOnce) {
  GPT model(tiny_config(3), 64);
  std::vector<torch::Tensor> decay, no_decay;
  model->decay_and_no_decay(decay, no_decay);
  EXPECT_EQ(decay.size(), 3u * 4u);  // c_attn, attn c_proj, c_fc, mlp c_proj per block
  std::unordered_set<const void*> seen;
  for (auto& p : decay) {
    EXPECT_EQ(p.dim(), 2);
    EXPECT_TRUE(seen.insert(p.unsafeGetTensorImpl()).second);
  }
  for (auto& p : no_decay) EXPECT_TRUE(seen.insert(p.unsafeGetTensorImpl()).second);
  EXPECT_EQ(seen.size(), model->parameters().size());
  for (auto& p : model->parameters()) EXPECT_EQ(seen.count(p.unsafeGetTensorImpl()), 1u);
  // Embeddings (the tied head among them) are not decayed.
  for (auto& p : decay) {
    EXPECT_FALSE(p.is_same(model->wte->weight));
    EXPECT_FALSE(p.is_same(model->wpe->weight));
  }
}

TEST(Gpt, GenerateAppendsTokensAndCropsContext) {
  torch::manual_seed(0);
  GPT model(tiny_config(), 64);
  model->train();
  auto prompt_BT = torch::randint(64, {2, 5}, torch::kLong);
  // 5 + 20 tokens > block_size 16: forward would throw unless each step crops the context.
  auto out_BT = model->generate(prompt_BT, 20, 1.0, 10);
  EXPECT_EQ(out_BT.sizes(), (std::vector<int64_t>{2, 25}));
  EXPECT_TRUE(out_BT.slice(1, 0, 5).equal(prompt_BT));
  EXPECT_GE(out_BT.min().item<int64_t>(), 0);
  EXPECT_LT(out_BT.max().item<int64_t>(), 64);
  EXPECT_TRUE(model->is_training());  // mode restored
  model->eval();
  model->generate(prompt_BT, 2);
  EXPECT_FALSE(model->is_training());
}

TEST(Gpt, GenerateIsReproducibleAndTopKOneIsGreedy) {
  torch::manual_seed(0);
  auto cfg = tiny_config();
  cfg.dropout = 0.2;  // generation must run in eval mode, or dropout would make this flaky
  GPT model(cfg, 64);
  auto prompt_BT = torch::randint(64, {2, 3}, torch::kLong);
  auto a = model->generate(prompt_BT, 10, 1.0, 0, at::detail::createCPUGenerator(7));
  auto b = model->generate(prompt_BT, 10, 1.0, 0, at::detail::createCPUGenerator(7));
  EXPECT_TRUE(a.equal(b));
  auto greedy = model->generate(prompt_BT, 10, /*temperature=*/0.0);
  auto top1 = model->generate(prompt_BT, 10, /*temperature=*/1.0, /*top_k=*/1);
  EXPECT_TRUE(greedy.equal(top1));
  EXPECT_FALSE(model->generate(prompt_BT, 10, 1.0, 0, at::detail::createCPUGenerator(8)).equal(a));
}

TEST(Gpt, InvalidShapesAreConfigErrors) {
  auto cfg = tiny_config();
  cfg.n_head = 3;  // 32 % 3 != 0
  EXPECT_THROW(GPT(cfg, 64), ConfigError);
  EXPECT_THROW(GPT(tiny_config(), 0), ConfigError);
  cfg = tiny_config();
  cfg.dropout = 1.0;
  EXPECT_THROW(GPT(cfg, 64), ConfigError);
  GPT model(tiny_config(), 64);
  EXPECT_THROW(model->set_activation_checkpointing(-1), ConfigError);
  EXPECT_THROW(parse_attention_kernel("auto"), ConfigError);
  EXPECT_EQ(parse_attention_kernel("math"), AttentionKernel::Math);
}

}  // namespace
}  // namespace hwt
