// Deferred init (model/deferred_init.h): a GPT built with placeholders holds no weight storage, yet
// every parameter's materialized value is bit for bit the ordinary build's under the same seed, for
// both families (GPT-2's residual scaling, Llama's GQA, tied and untied heads, biases), and the
// global generator ends where the ordinary build leaves it (dropout and sampling draw the same after).
#include <gtest/gtest.h>

#include "hwtrain/model/deferred_init.h"
#include "hwtrain/model/gpt.h"
#include "hwtrain/model/tensor_parallel.h"
#include "model/model_test_util.h"
#include "support/thread_comm.h"

namespace hwt {
namespace deferred_init_test {

ModelConfig llama_config(bool tied, bool bias) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  c.tie_word_embeddings = tied;
  c.bias = bias;
  return c;
}

struct Builds {
  GPT whole{nullptr}, deferred{nullptr};
  torch::Tensor after_whole, after_deferred;  // the generator's next draws after each build
};

Builds build_both(const ModelConfig& cfg, int64_t vocab) {
  Builds b;
  torch::manual_seed(1234);
  b.whole = GPT(cfg, vocab);
  b.after_whole = torch::rand({64});
  torch::manual_seed(1234);
  b.deferred = GPT(cfg, vocab, AttentionKernel::Sdpa, std::make_shared<DeferredInit>());
  b.after_deferred = torch::rand({64});
  return b;
}

void expect_same_values(const ModelConfig& cfg, int64_t vocab) {
  Builds b = build_both(cfg, vocab);
  EXPECT_TRUE(torch::equal(b.after_whole, b.after_deferred)) << "the generator moved differently";
  EXPECT_EQ(b.whole->num_parameters(false), b.deferred->num_parameters(false));
  auto whole = b.whole->named_parameters();
  size_t checked = 0;
  for (const ParameterUnit& u : b.deferred->parameter_units()) {
    ASSERT_TRUE(u.initial_value) << u.name;
    for (const auto& [name, p] : u.params) {
      EXPECT_TRUE(is_placeholder(p)) << name;
      EXPECT_EQ(p.storage().nbytes(), sizeof(float)) << name;
      torch::Tensor value = torch::empty(p.sizes(), torch::kFloat);
      u.initial_value(p, value);
      const torch::Tensor* w = whole.find(name);
      ASSERT_NE(w, nullptr) << name;
      EXPECT_TRUE(torch::equal(value, *w)) << name << " differs from the ordinary build";
      u.initial_value(p, value);  // again: a replay does not use up its record
      EXPECT_TRUE(torch::equal(value, *w)) << name << " materialized twice";
      ++checked;
    }
  }
  EXPECT_EQ(checked, whole.size());
}

TEST(DeferredInit, Gpt2ValuesAreTheOrdinaryBuildsBitForBit) {
  ModelConfig cfg = test::tiny_config(3, 0.1);
  cfg.bias = true;
  expect_same_values(cfg, 67);  // an odd vocabulary: normal_'s 16-value tail
}

TEST(DeferredInit, LlamaValuesAreTheOrdinaryBuildsBitForBit) {
  expect_same_values(llama_config(false, false), 64);
  expect_same_values(llama_config(true, true), 61);
}

// Under tensor parallelism each rank's placeholders take their cut's shape, and filled they equal
// its cut of the ordinary build's whole weights (GPT-2's fused q|k|v in three blocks, Llama's GQA,
// a vocabulary that does not divide by the ranks).
void expect_same_cuts(const ModelConfig& cfg, int64_t vocab, int size) {
  torch::manual_seed(1234);
  GPT whole(cfg, vocab);
  testing::ThreadGroup group(size);
  for (int r = 0; r < size; ++r) {
    torch::manual_seed(1234);
    GPT deferred(cfg, vocab, AttentionKernel::Sdpa, std::make_shared<DeferredInit>());
    deferred->set_tensor_parallel(std::make_shared<testing::ThreadComm>(group, r));
    int cut = 0;
    for (const auto& item : deferred->named_parameters()) {
      const ShardSpec spec = deferred->tensor_parallel_spec(item.key());
      const torch::Tensor expected = shard_of(*whole->named_parameters().find(item.key()), spec, r, size);
      EXPECT_EQ(item.value().sizes(), expected.sizes()) << item.key();
      EXPECT_TRUE(is_placeholder(item.value())) << item.key();
      cut += spec.sharded();
    }
    EXPECT_GE(cut, 1 + 4 * cfg.n_layer) << "the embedding and every block's matrices are cut";
    deferred->materialize_parameters();
    for (const auto& item : deferred->named_parameters()) {
      const torch::Tensor expected =
          shard_of(*whole->named_parameters().find(item.key()), deferred->tensor_parallel_spec(item.key()), r, size);
      EXPECT_FALSE(is_placeholder(item.value())) << item.key();
      EXPECT_TRUE(torch::equal(item.value(), expected)) << item.key() << " on tensor rank " << r;
    }
  }
}

TEST(DeferredInit, TensorParallelCutsAreTheOrdinaryBuildsCuts) {
  ModelConfig gpt2 = test::tiny_config(2);
  gpt2.n_head = 4;
  gpt2.bias = true;
  expect_same_cuts(gpt2, 50, 2);
  expect_same_cuts(llama_config(false, true), 50, 2);
}

TEST(DeferredInit, MovingAPlaceholderModelAllocatesNothing) {
  GPT model(test::tiny_config(2), 64, AttentionKernel::Sdpa, std::make_shared<DeferredInit>());
  model->to(torch::kBFloat16);
  model->to(torch::Device(torch::kCPU), torch::kFloat);
  for (const auto& item : model->named_parameters()) {
    EXPECT_TRUE(is_placeholder(item.value())) << item.key();
    EXPECT_EQ(item.value().scalar_type(), torch::kFloat) << item.key();
  }
}

TEST(DeferredInit, APlaceholderTakesAnAssignedValue) {
  GPT model(test::tiny_config(2), 64, AttentionKernel::Sdpa, std::make_shared<DeferredInit>());
  torch::Tensor w = model->wte->weight;
  const torch::Tensor value = torch::randn(w.sizes(), torch::kDouble);
  assign_parameter(w, value);
  EXPECT_FALSE(is_placeholder(model->wte->weight));
  EXPECT_EQ(model->wte->weight.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(model->wte->weight, value.to(torch::kFloat)));
  EXPECT_TRUE(model->wte->weight.requires_grad());
}

TEST(DeferredInit, AWeightTheInitNeverDrewIsNamed) {
  DeferredInit init;
  torch::nn::Linear linear(4, 3);
  init.release(*linear, "proj.");
  torch::Tensor out = torch::empty({3, 4});
  try {
    init.materialize(linear->weight, out);
    FAIL() << "materialized a weight without a record";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("'proj.weight'"), std::string::npos) << e.what();
  }
  torch::Tensor bias = torch::empty({3});
  init.materialize(linear->bias, bias);  // a 1-D parameter keeps its constructed value
  EXPECT_FALSE(torch::equal(bias, torch::zeros({3})));
}

}  // namespace deferred_init_test
}  // namespace hwt
