// ZeRO-2/3 attached to the built-in GPT in one process (a Gloo group of one rank): the losses and
// weights equal the unsharded model's step for step (fp32), and ZeRO-3 with activation
// checkpointing gathers each block exactly once in forward and once in backward (the
// recomputation does not prefetch), never holding more than the rest's unit and two blocks. With
// 8-bit moments, one rank's shards step like 8-bit AdamW.
#include <gtest/gtest.h>

#include "dist/dist_test_util.h"
#include "hwtrain/model/gpt_model.h"
#include "hwtrain/model/gpt_stage.h"
#include "hwtrain/train/sharded_training.h"
#include "support/thread_comm.h"

namespace hwt {
namespace {

// GPT-2 (tied head: embeddings, final norm and head are one unit) or Llama with an untied head
// (units: embeddings, the blocks, final norm and head).
GPT tiny_gpt(bool llama, bool recompute = true) {
  torch::manual_seed(7);
  ModelConfig m;
  m.n_layer = 4;
  m.n_head = 2;
  m.n_embd = 32;
  m.block_size = 16;
  m.dropout = 0;
  if (llama) {
    m.architecture = Architecture::kLlama;
    m.n_kv_head = 1;
    m.intermediate_size = 64;
    m.bias = false;
  }
  GPT g(m, 64);
  g->set_activation_checkpointing(recompute ? 1 : 0);
  return g;
}

std::unique_ptr<AdamW> adamw(GPT& g) {
  std::vector<std::pair<std::string, torch::Tensor>> d, n;
  g->named_decay_and_no_decay(d, n);
  return std::make_unique<AdamW>(d, n, AdamWOptions{});
}

// One optimizer step at lr 1e-2 from the loss of a forward of the sharded model; the loss.
double step_on(ShardedTraining& st, const torch::Tensor& loss) {
  st.engine->begin_micro_step(true);
  loss.backward();
  st.engine->finish();
  st.sharding.optimizer->step(1e-2);
  st.sharding.after_step();
  st.sharding.optimizer->zero_grad();
  return loss.item<double>();
}

double sharded_step(ShardedTraining& st, GPT& model, const torch::Tensor& x, const torch::Tensor& y) {
  return step_on(st, model->forward_loss(x, y));
}

class ShardedTrainingTest : public ::testing::TestWithParam<std::tuple<ShardStage, bool, bool>> {};

TEST_P(ShardedTrainingTest, EqualsTheUnshardedModelAndGathersEachBlockTwicePerStep) {
  auto group = testing::one_rank_group();
  // Without recomputation ZeRO-3 frees storage that autograd saved views of, and re-gathers it.
  const auto [stage, llama, recompute] = GetParam();
  GPT plain = tiny_gpt(llama, recompute), sharded = tiny_gpt(llama, recompute);
  auto plain_opt = adamw(plain), whole = adamw(sharded);
  GptModel sharded_model(sharded);
  ShardedTraining st = shard_training(sharded_model, *whole, group, stage, Precision::Fp32);
  const size_t units = plain->parameter_units().size();
  EXPECT_EQ(units, llama ? 6u : 5u);
  torch::manual_seed(1);
  const auto x = torch::randint(64, {2, 16}), y = torch::randint(64, {2, 16});
  for (int step = 0; step < 3; ++step) {
    plain_opt->zero_grad();
    torch::Tensor plain_loss = plain->forward_loss(x, y);
    plain_loss.backward();
    const double a = plain_loss.item<double>();
    plain_opt->step(1e-2);

    const auto before = st.engine->stats().all_gathers;
    const double loss = sharded_step(st, sharded, x, y);
    EXPECT_NEAR(loss, a, 1e-6) << "step " << step;
    if (stage == ShardStage::Zero3) {  // each block freed after forward is gathered again for backward
      // Llama: the embeddings once (their backward reads no weights), the blocks twice, the head once.
      // GPT-2: the tied rest for the embeddings and again for the final norm and head, the blocks twice.
      const int64_t want = llama ? 1 + 2 * 4 + 1 : 2 + 2 * 4;
      EXPECT_EQ(st.engine->stats().all_gathers - before, want) << "step " << step;
    }
  }
  std::vector<ParameterUnit> parts = plain->parameter_units();
  int64_t edge = 0, one_block = 0;
  for (const auto& [n, p] : parts.front().params) edge += p.numel() * 4;  // tied: also the final norm
  for (const auto& [n, p] : parts[1].params) one_block += p.numel() * 4;
  if (stage == ShardStage::Zero3) {
    // The embeddings' unit with the first block (prefetched) at the start, two blocks while they run,
    // the tied rest alone at the head: never the rest beside two blocks.
    EXPECT_LE(st.engine->stats().peak_gathered_bytes, std::max(edge + one_block, 2 * one_block) + 64);  // + padding
  }
  // At most two units' gradients being reduced at once (whole input and shard: twice over one rank),
  // not every unit's until the end of backward.
  EXPECT_LE(st.engine->stats().peak_reducing_bytes, 2 * 2 * std::max(edge, one_block) + 256);
  const auto plain_params = plain->named_parameters();  // find() points into it: it must outlive the loop
  for (const auto& [name, w] : st.engine->full_parameters()) {
    auto* p = plain_params.find(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_TRUE(torch::allclose(w, *p, 1e-5, 1e-6)) << name;
  }
  group->shutdown();
}

// The engine's hooks, noting what is gathered once the last block's forward has started.
class GatheredAtLastBlock : public UnitHooks {
 public:
  GatheredAtLastBlock(std::shared_ptr<ShardedParameters> engine, size_t last) : e_(std::move(engine)), last_(last) {}
  void before_forward(size_t u) override {
    e_->before_forward(u);
    if (u == last_) bytes.push_back(e_->gathered_bytes());
  }
  torch::Tensor after_forward(size_t u, const torch::Tensor& out) override { return e_->after_forward(u, out); }
  void release(size_t u) override { e_->release(u); }
  void begin_forward() override { e_->begin_forward(); }
  void before_reuse(size_t u) override { e_->before_reuse(u); }
  torch::Tensor release_after_backward(size_t u, const torch::Tensor& in) override {
    return e_->release_after_backward(u, in);
  }
  std::vector<int64_t> bytes;

 private:
  std::shared_ptr<ShardedParameters> e_;
  size_t last_;
};

// ZeRO-3 of a tied model: the first step learns that the rest is used again for the head; from the
// second on, the last block prefetches it (as it prefetches an untied head).
TEST(ShardedTiedRest, TheLastBlockPrefetchesItForTheHeadFromTheSecondStep) {
  auto group = testing::one_rank_group();
  GPT g = tiny_gpt(false, false);
  auto whole = adamw(g);
  GptModel model(g);
  ShardedTraining st = shard_training(model, *whole, group, ShardStage::Zero3, Precision::Fp32);
  auto spy = std::make_shared<GatheredAtLastBlock>(st.engine, 4);
  g->set_unit_hooks(spy);
  const std::vector<ParameterUnit> parts = g->parameter_units();
  int64_t rest = 0, block = 0;
  for (const auto& [n, p] : parts.front().params) rest += p.numel() * 4;
  for (const auto& [n, p] : parts.back().params) block += p.numel() * 4;
  torch::manual_seed(1);
  const auto x = torch::randint(64, {2, 16}), y = torch::randint(64, {2, 16});
  for (int step = 0; step < 3; ++step) sharded_step(st, g, x, y);
  ASSERT_EQ(spy->bytes.size(), 3u);
  EXPECT_EQ(spy->bytes[0], block);
  EXPECT_EQ(spy->bytes[1], block + rest);
  EXPECT_EQ(spy->bytes[2], block + rest);
  group->shutdown();
}

// The last of two pipeline stages (Llama: blocks 2 and 3, the final norm and head) under ZeRO-3
// with every block recomputed. Its engine's unit 0 is a block, not the embeddings: that block's
// recomputation in backward must not count as the start of a forward, which would gather the
// block after it again. Each block is gathered twice per step and the head once.
TEST(ShardedStage, ALaterStageGathersEachBlockOnceForForwardAndOnceForBackward) {
  auto group = testing::one_rank_group();
  GPT g = tiny_gpt(true);
  testing::ThreadGroup line(2);
  GptStage stage(g, StagePlace{1, 2, {{2, 4}}}, std::make_shared<testing::ThreadComm>(line, 1), nullptr);
  std::vector<std::pair<std::string, torch::Tensor>> d, n;
  stage.named_decay_and_no_decay(d, n);
  AdamW whole(d, n, AdamWOptions{});
  ShardedTraining st = shard_training(stage, whole, group, ShardStage::Zero3, Precision::Fp32);
  torch::manual_seed(1);
  const auto y = torch::randint(64, {2, 16});
  for (int step = 0; step < 3; ++step) {
    const auto before = st.engine->stats().all_gathers;
    torch::Tensor in = torch::randn({2, 16, 32}).requires_grad_();  // the activations stage 0 would send
    step_on(st, stage.forward_stage(in, y, 0));
    EXPECT_EQ(st.engine->stats().all_gathers - before, 2 * 2 + 1) << "step " << step;
    ASSERT_TRUE(in.grad().defined());
  }
  group->shutdown();
}

// dist.reduce_dtype = bf16: the engine reduce-scatters bf16 gradients; over one rank that is each
// gradient rounded to bf16, so 3 ZeRO-2 steps equal plain AdamW steps on bf16-rounded gradients,
// and differ from the fp32 reduce's.

class ShardedReduce : public ::testing::TestWithParam<ShardStage> {};

TEST_P(ShardedReduce, Bf16ReduceStepsOnTheGradientsRoundedToBf16) {
  const ShardStage stage = GetParam();
  auto group = testing::one_rank_group();
  GPT rounded = tiny_gpt(false, false), exact = tiny_gpt(false, false), sharded = tiny_gpt(false, false);
  auto rounded_opt = adamw(rounded), exact_opt = adamw(exact), whole = adamw(sharded);
  GptModel sharded_model(sharded);
  ShardedTraining st = shard_training(sharded_model, *whole, group, stage, Precision::Fp32, {}, ReduceDtype::Bf16);
  auto bf16 = [](const torch::Tensor& g) { return g.to(torch::kBFloat16).to(torch::kFloat); };
  torch::manual_seed(1);
  const auto x = torch::randint(64, {2, 16}), y = torch::randint(64, {2, 16});
  for (int step = 0; step < 3; ++step) {
    for (auto [model, opt, round] : {std::make_tuple(&rounded, rounded_opt.get(), true),
                                     std::make_tuple(&exact, exact_opt.get(), false)}) {
      opt->zero_grad();
      (*model)->forward_loss(x, y).backward();
      torch::NoGradGuard no_grad;
      for (auto& p : (*model)->parameters()) {
        if (round) p.mutable_grad().copy_(bf16(p.grad()));
      }
      opt->step(1e-2);
    }
    sharded_step(st, sharded, x, y);
  }
  const auto rounded_params = rounded->named_parameters(), exact_params = exact->named_parameters();
  double off_exact = 0;
  for (const auto& [name, w] : st.engine->full_parameters()) {
    EXPECT_TRUE(torch::allclose(w, rounded_params[name], 1e-5, 1e-7)) << name;
    off_exact = std::max(off_exact, (w - exact_params[name]).abs().max().item<double>());
  }
  EXPECT_GT(off_exact, 1e-6);  // the rounding is applied
  group->shutdown();
}

INSTANTIATE_TEST_SUITE_P(Stages, ShardedReduce, ::testing::Values(ShardStage::Zero2, ShardStage::Zero3),
                         [](const ::testing::TestParamInfo<ShardStage>& info) {
                           return std::string(shard_stage_name(info.param));
                         });

// optimization.optimizer_state_dtype = int8 under ZeRO-2/3: each shard's AdamW keeps its segments'
// moments in 8 bits. Over one rank every parameter is one segment, quantized in the same blocks
// as the whole tensor: 3 steps equal 8-bit AdamW's on the unsharded model.
TEST(ShardedInt8, OneRankStepsEqualEightBitAdamW) {
  auto group = testing::one_rank_group();
  for (ShardStage stage : {ShardStage::Zero2, ShardStage::Zero3}) {
    GPT plain = tiny_gpt(false, false), sharded = tiny_gpt(false, false);
    std::vector<std::pair<std::string, torch::Tensor>> d, n, sd, sn;
    plain->named_decay_and_no_decay(d, n);
    sharded->named_decay_and_no_decay(sd, sn);
    AdamWOptions eight_bit;
    eight_bit.int8_moments = true;
    AdamW plain_opt(d, n, eight_bit), whole(sd, sn, eight_bit);
    GptModel sharded_model(sharded);
    ShardedTraining st = shard_training(sharded_model, whole, group, stage, Precision::Fp32);
    torch::manual_seed(1);
    const auto x = torch::randint(64, {2, 16}), y = torch::randint(64, {2, 16});
    for (int step = 0; step < 3; ++step) {
      plain_opt.zero_grad();
      torch::Tensor loss = plain->forward_loss(x, y);
      loss.backward();
      plain_opt.step(1e-2);
      EXPECT_NEAR(sharded_step(st, sharded, x, y), loss.item<double>(), 1e-6) << "step " << step;
    }
    int64_t codes = 0;
    for (const auto& [name, t] : st.sharding.optimizer->state()) codes += name.rfind("exp_avg.q8.", 0) == 0 ? t.numel() : 0;
    EXPECT_GT(codes, 0);  // the blocks' weights (4096 elements and up) keep 8-bit moments
    const auto plain_params = plain->named_parameters();
    for (const auto& [name, w] : st.engine->full_parameters()) {
      EXPECT_TRUE(torch::allclose(w, plain_params[name], 1e-5, 1e-6)) << shard_stage_name(stage) << " " << name;
    }
  }
  group->shutdown();
}

INSTANTIATE_TEST_SUITE_P(Stages, ShardedTrainingTest,
                         ::testing::Combine(::testing::Values(ShardStage::Zero2, ShardStage::Zero3), ::testing::Bool(),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<ShardStage, bool, bool>>& info) {
                           return std::string(shard_stage_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_llama" : "_gpt2") +
                                  (std::get<2>(info.param) ? "_recompute" : "_kept");
                         });

}  // namespace
}  // namespace hwt
