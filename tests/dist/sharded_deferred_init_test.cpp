// A deferred GPT (model/deferred_init.h) sharded on 2 Gloo ranks: the engine fills each unit from
// the recorded draws, and the whole weights it holds are bit for bit those of a GPT built the
// ordinary way from the same seed, under ZeRO-3 (nothing but the master shards kept) and ZeRO-2
// (the parameters whole again); the master shards are those of the ordinary model's.
#include <gtest/gtest.h>

#include <map>

#include "dist/dist_test_util.h"
#include "hwtrain/dist/sharded_parameters.h"
#include "hwtrain/model/gpt.h"

namespace hwt {
namespace sharded_deferred_init_test {

ModelConfig small_gpt2() {
  ModelConfig c;
  c.preset = "";
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  c.bias = true;
  return c;
}

std::vector<ShardedUnitParams> units_of(GPT& model) {
  std::vector<ShardedUnitParams> units;
  for (auto& u : model->parameter_units()) units.push_back({u.name, u.params, u.initial_value});
  return units;
}

void check_stage(ShardStage stage) {
  auto group = testing::worker_group();
  torch::manual_seed(7);
  GPT whole(small_gpt2(), 67);
  torch::manual_seed(7);
  GPT deferred(small_gpt2(), 67, AttentionKernel::Sdpa, std::make_shared<DeferredInit>());
  ShardingOptions o;
  o.stage = stage;
  std::map<std::string, torch::Tensor> expected;  // before the reference engine takes the weights' storage
  for (const auto& item : whole->named_parameters()) expected[item.key()] = item.value().detach().clone();
  ShardedParameters sharded(group, units_of(deferred), o);
  ShardedParameters reference(group, units_of(whole), o);  // the ordinary model's shards
  ASSERT_EQ(sharded.segments().size(), reference.segments().size());
  for (size_t i = 0; i < sharded.segments().size(); ++i) {
    EXPECT_TRUE(torch::equal(sharded.segments()[i].master, reference.segments()[i].master)) << sharded.segments()[i].name();
  }
  EXPECT_EQ(sharded.gathered_bytes(), stage == ShardStage::Zero3 ? 0 : reference.gathered_bytes());
  const auto full = sharded.full_parameters(/*everywhere=*/true);
  ASSERT_EQ(full.size(), expected.size());
  for (const auto& [name, value] : full) {
    ASSERT_EQ(expected.count(name), 1u) << name;
    EXPECT_TRUE(torch::equal(value, expected.at(name))) << name;
  }
  if (stage == ShardStage::Zero2) {  // the model's own parameters are whole views again
    for (const auto& item : deferred->named_parameters()) {
      EXPECT_FALSE(is_placeholder(item.value())) << item.key();
      EXPECT_TRUE(torch::equal(item.value(), expected.at(item.key()))) << item.key();
    }
  }
  group->shutdown();
}

TEST(DistWorker, ShardedDeferredZero3) {
  HWT_WORKER_ONLY();
  check_stage(ShardStage::Zero3);
}

TEST(DistWorker, ShardedDeferredZero2) {
  HWT_WORKER_ONLY();
  check_stage(ShardStage::Zero2);
}

TEST(ShardedDeferredInit, Zero3FillsEachUnitWithTheOrdinaryValues) {
  auto run = testing::run_workers("ShardedDeferredZero3", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

TEST(ShardedDeferredInit, Zero2FillsEachUnitWithTheOrdinaryValues) {
  auto run = testing::run_workers("ShardedDeferredZero2", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

}  // namespace sharded_deferred_init_test
}  // namespace hwt
