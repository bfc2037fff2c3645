// The optimizer in backward: the same weights as a step after backward, gradients freed as they
// are made (so the step's peak of live tensors falls by about the gradients), hooks removed.
#include "hwtrain/train/optimizer_in_backward.h"

#include <gtest/gtest.h>

#include <limits>
#include <tuple>

#include "hwtrain/model/gpt.h"
#include "hwtrain/obs/host_allocation_counter.h"

namespace hwt {
namespace {

ModelConfig tiny_model() {
  ModelConfig m;
  m.n_layer = 3;
  m.n_head = 2;
  m.n_embd = 32;
  m.block_size = 16;
  m.vocab_size = 64;
  m.dropout = 0.0;
  return m;
}

struct Model {
  GPT gpt;
  std::unique_ptr<AdamW> optimizer;
  Model(const ModelConfig& m, int64_t checkpoint_every, bool fused) : gpt(nullptr) {
    torch::manual_seed(7);
    gpt = GPT(m, m.vocab_size);
    gpt->set_activation_checkpointing(checkpoint_every);
    std::vector<std::pair<std::string, torch::Tensor>> decay, no_decay;
    gpt->named_decay_and_no_decay(decay, no_decay);
    AdamWOptions o;
    o.fused = fused;
    optimizer = std::make_unique<AdamW>(decay, no_decay, o);
  }
};

std::pair<torch::Tensor, torch::Tensor> batch(int step, const ModelConfig& m, int64_t rows = 4) {
  torch::manual_seed(100 + step);
  return {torch::randint(m.vocab_size, {rows, m.block_size}, torch::kInt64),
          torch::randint(m.vocab_size, {rows, m.block_size}, torch::kInt64)};
}

class OptimizerInBackwardEquality : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(OptimizerInBackwardEquality, SameWeightsAsAStepAfterBackward) {
  const auto [checkpoint_every, fused] = GetParam();
  const ModelConfig m = tiny_model();
  Model after(m, checkpoint_every, fused), inside(m, checkpoint_every, fused);
  OptimizerInBackward hooks(*inside.optimizer);
  const double lrs[] = {1e-2, 5e-3, 2e-2};
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = batch(step, m);
    after.gpt->forward_loss(x, y).backward();
    const double expected_norm = torch::nn::utils::clip_grad_norm_(after.gpt->parameters(),
                                                                   std::numeric_limits<double>::infinity());
    after.optimizer->step(lrs[step]);
    after.optimizer->zero_grad();

    hooks.begin_step(lrs[step]);
    inside.gpt->forward_loss(x, y).backward();
    EXPECT_EQ(hooks.parameters_updated(), static_cast<int64_t>(inside.optimizer->num_parameters()));
    EXPECT_NEAR(hooks.grad_norm(), expected_norm, 1e-5 * expected_norm);
    for (const auto& p : inside.gpt->parameters()) EXPECT_FALSE(p.grad().defined());
  }
  auto a = after.gpt->named_parameters(), b = inside.gpt->named_parameters();
  for (const auto& item : a) {
    EXPECT_TRUE(torch::allclose(item.value(), b[item.key()], 0, 1e-6)) << item.key();
  }
  auto sa = after.optimizer->state(), sb = inside.optimizer->state();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(torch::allclose(sa[i].second, sb[i].second, 0, 1e-6)) << sa[i].first;
}

INSTANTIATE_TEST_SUITE_P(CheckpointingAndKernel, OptimizerInBackwardEquality,
                         ::testing::Combine(::testing::Values<int64_t>(0, 1), ::testing::Bool()));

TEST(OptimizerInBackward, RemovesItsHooksWhenDestroyed) {
  const ModelConfig m = tiny_model();
  Model model(m, 0, true);
  { OptimizerInBackward hooks(*model.optimizer); }
  const auto before = model.gpt->named_parameters()["wte.weight"].detach().clone();
  auto [x, y] = batch(0, m);
  model.gpt->forward_loss(x, y).backward();
  for (const auto& p : model.gpt->parameters()) EXPECT_TRUE(p.grad().defined());
  EXPECT_TRUE(model.gpt->named_parameters()["wte.weight"].equal(before));
  // A second installer is refused while the first lives, and leaves no hook of its own.
  {
    OptimizerInBackward first(*model.optimizer);
    EXPECT_THROW(OptimizerInBackward second(*model.optimizer), c10::Error);
  }
  // A frozen parameter is refused before any hook is set.
  model.gpt->named_parameters()["wpe.weight"].requires_grad_(false);
  EXPECT_THROW(OptimizerInBackward frozen(*model.optimizer), c10::Error);
  model.gpt->zero_grad();
  model.gpt->forward_loss(x, y).backward();
  for (const auto& p : model.gpt->named_parameters()) {
    if (p.value().requires_grad()) {
      EXPECT_TRUE(p.value().grad().defined()) << p.key() << " lost its gradient to a hook";
    }
  }
}

TEST(OptimizerInBackward, TheStepHoldsFarFewerGradientBytes) {
  if (!install_host_allocation_counter()) GTEST_SKIP() << "c10 kept another CPU allocator";
  // Wide and short: the weight gradients (4 x 12 x 128^2 fp32 = 3 MiB) dwarf the activations.
  ModelConfig m = tiny_model();
  m.n_layer = 4;
  m.n_embd = 128;
  m.block_size = 8;
  auto peak_of_step = [&](bool in_backward) {
    Model model(m, 0, true);
    std::unique_ptr<OptimizerInBackward> hooks;
    if (in_backward) hooks = std::make_unique<OptimizerInBackward>(*model.optimizer);
    auto [x, y] = batch(0, m, 1);
    if (hooks) hooks->begin_step(1e-3);
    const int64_t at_start = host_allocation().current_bytes;
    reset_host_allocation_peak();
    model.gpt->forward_loss(x, y).backward();
    if (!hooks) model.optimizer->step(1e-3);
    return host_allocation().peak_bytes - at_start;
  };
  const int64_t after = peak_of_step(false), inside = peak_of_step(true);
  const int64_t gradient_bytes = 4 * 12 * 128 * 128 * 4;
  EXPECT_LT(inside, after - gradient_bytes / 2) << "after backward " << after << " B, in backward " << inside << " B";
}

}  // namespace
}  // namespace hwt
