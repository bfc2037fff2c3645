// Tensor parallelism checked against the whole model in one process: threads play the ranks of a
// group (support/thread_comm.h), each runs forward and backward on its shards, and the loss, the gradients
// (cut to each rank's shard) and the whole logits must equal the whole model's within 1e-5 (fp32),
// for GPT-2 (fused q|k|v, tied head, biases) and Llama (GQA, untied head, Qwen2-style q/k/v
// biases), with activation checkpointing and with sequence parallelism, on a vocabulary that does
// not divide by the ranks.
// Also: the cut/join of checkpoint tensors round-trips, and a mesh the model cannot be cut by is
// refused naming the key.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include "hwtrain/core/error.h"
#include "hwtrain/model/gpt.h"
#include "hwtrain/model/gpt_model.h"
#include "hwtrain/model/tensor_parallel.h"
#include "model/model_test_util.h"
#include "support/thread_comm.h"

namespace hwt {
namespace {

using testing::ThreadComm;
using testing::ThreadGroup;

ModelConfig config_for(const std::string& family) {
  ModelConfig cfg = test::tiny_config(/*n_layer=*/2);
  cfg.n_head = 4;
  if (family == "llama") {
    cfg.architecture = Architecture::kLlama;
    cfg.n_kv_head = 2;
    cfg.bias = true;  // Qwen2's q/k/v biases
  }
  return cfg;
}

constexpr int64_t kVocab = 50;  // 4 ranks: 13, 13, 13 and 11 rows

struct Reference {
  double loss = 0;
  std::map<std::string, torch::Tensor> grads, weights;
  torch::Tensor logits;
};

Reference whole_model_step(const ModelConfig& cfg, const torch::Tensor& x, const torch::Tensor& y, int64_t every_k) {
  torch::manual_seed(7);
  GPT model(cfg, kVocab);
  model->set_activation_checkpointing(every_k);
  Reference r;
  auto loss = model->forward_loss(x, y);
  loss.backward();
  r.loss = loss.item<double>();
  for (auto& item : model->named_parameters()) {
    r.grads[item.key()] = item.value().grad().clone();
    r.weights[item.key()] = item.value().detach().clone();
  }
  torch::NoGradGuard no_grad;
  r.logits = model->forward(x);
  return r;
}

// (family, ranks, checkpoint every k blocks, sequence parallel)
struct TensorParallelCase : ::testing::TestWithParam<std::tuple<std::string, int, int64_t, bool>> {};

TEST_P(TensorParallelCase, LossGradientsAndLogitsEqualTheWholeModel) {
  const auto [family, size, every_k, sequence_parallel] = GetParam();
  const ModelConfig cfg = config_for(family);
  torch::manual_seed(3);
  const torch::Tensor x = torch::randint(kVocab, {3, 12}, torch::kLong);
  torch::Tensor y = torch::randint(kVocab, {3, 12}, torch::kLong);
  y[0][5] = -1;  // an ignored target
  const Reference ref = whole_model_step(cfg, x, y, every_k);

  ThreadGroup group(size);
  std::vector<GPT> models;
  std::vector<std::shared_ptr<ThreadComm>> comms;
  for (int r = 0; r < size; ++r) {
    torch::manual_seed(7);  // every rank builds the same whole model, then keeps its shard
    models.emplace_back(cfg, kVocab);
    comms.push_back(std::make_shared<ThreadComm>(group, r));
    models.back()->set_tensor_parallel(comms.back(), sequence_parallel);
    models.back()->set_activation_checkpointing(every_k);
  }
  std::vector<double> losses(static_cast<size_t>(size));
  std::vector<torch::Tensor> logits(static_cast<size_t>(size));
  for (const auto& e : testing::run_ranks(group, [&](int r) {
         auto loss = models[r]->forward_loss(x, y);
         loss.backward();
         models[r]->sum_sequence_parallel_gradients();
         losses[r] = loss.item<double>();
         logits[r] = models[r]->forward(x);
       })) {
    ASSERT_EQ(e, "");
  }

  for (int r = 0; r < size; ++r) {
    EXPECT_NEAR(losses[r], ref.loss, 1e-5) << "rank " << r;
    EXPECT_LT((logits[r] - ref.logits).abs().max().item<double>(), 1e-5) << "rank " << r;
    int sharded = 0;
    for (auto& item : models[r]->named_parameters()) {
      const ShardSpec spec = models[r]->tensor_parallel_spec(item.key());
      sharded += spec.sharded();
      const torch::Tensor expected = shard_of(ref.grads.at(item.key()), spec, r, size);
      ASSERT_EQ(item.value().grad().sizes(), expected.sizes()) << item.key();
      EXPECT_LT((item.value().grad() - expected).abs().max().item<double>(), 1e-5) << item.key() << " rank " << r;
    }
    EXPECT_GE(sharded, 1 + 2 * 4) << "the embedding and every block's four matrices are cut";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TensorParallelCase,
                         ::testing::Values(std::make_tuple("gpt2", 2, 0, false), std::make_tuple("gpt2", 4, 1, false),
                                           std::make_tuple("llama", 2, 0, false), std::make_tuple("llama", 2, 1, false),
                                           std::make_tuple("gpt2", 2, 0, true), std::make_tuple("gpt2", 4, 1, true),
                                           std::make_tuple("llama", 2, 1, true)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_checkpointed" : "") +
                                  (std::get<3>(info.param) ? "_sequence_parallel" : "");
                         });

TEST(TensorParallel, CheckpointTensorsAreWholeAndCutBackExactly) {
  const ModelConfig cfg = config_for("gpt2");
  torch::manual_seed(7);
  GPT whole(cfg, kVocab);
  NamedParameters whole_params;
  for (auto& item : whole->named_parameters()) whole_params.emplace_back(item.key(), item.value().detach().clone());
  ThreadGroup group(4);
  std::vector<std::shared_ptr<GptModel>> models;
  for (int r = 0; r < 4; ++r) {
    torch::manual_seed(7);
    GPT gpt(cfg, kVocab);
    gpt->set_tensor_parallel(std::make_shared<ThreadComm>(group, r));
    models.push_back(std::make_shared<GptModel>(gpt));
  }
  std::vector<NamedParameters> joined(4), cut(4);
  for (const auto& e : testing::run_ranks(group, [&](int r) {
         NamedParameters local;
         for (auto& item : models[r]->module().named_parameters()) local.emplace_back(item.key(), item.value().detach());
         joined[r] = models[r]->whole_tensors(local);
         cut[r] = models[r]->local_tensors(joined[r]);
       })) {
    ASSERT_EQ(e, "");
  }
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(joined[r].size(), whole_params.size());
    for (size_t i = 0; i < whole_params.size(); ++i) {
      EXPECT_TRUE(torch::equal(joined[r][i].second, whole_params[i].second)) << whole_params[i].first;
      EXPECT_TRUE(torch::equal(cut[r][i].second, models[r]->module().named_parameters()[cut[r][i].first]))
          << cut[r][i].first;
    }
    EXPECT_EQ(models[r]->checkpoint_writer(), r == 0);
  }
  NamedParameters wrong{{"wte.weight", torch::zeros({kVocab + 1, cfg.n_embd})}};
  EXPECT_THROW(models[0]->local_tensors(wrong), IoError);
}

// Decoding with the model split: every rank calls generate with the same seed and gets the whole
// model's tokens, greedy and sampled, with the KV cache (past block_size: the window slides) and
// without; sequence parallelism is off meanwhile and on again after.
struct SplitDecoding : ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(SplitDecoding, EveryRankDrawsTheWholeModelsTokens) {
  const auto [family, size] = GetParam();
  const ModelConfig cfg = config_for(family);  // block_size 16: 5 + 20 tokens slide the window
  torch::manual_seed(3);
  const torch::Tensor prompt = torch::randint(kVocab, {2, 5}, torch::kLong);
  auto decode = [&](GPT& m, double temperature, bool cache) {
    return m->generate(prompt, 20, temperature, 0, at::make_generator<at::CPUGeneratorImpl>(11), 1.0, cache);
  };
  torch::manual_seed(7);
  GPT whole(cfg, kVocab);
  const std::vector<torch::Tensor> want{decode(whole, 0.0, true), decode(whole, 1.0, true), decode(whole, 0.0, false)};
  KVCache whole_cache(cfg.n_layer);
  const torch::Tensor first_logits = whole->forward_cached(prompt, whole_cache);

  ThreadGroup group(size);
  std::vector<GPT> models;
  std::vector<std::shared_ptr<ThreadComm>> comms;
  for (int r = 0; r < size; ++r) {
    torch::manual_seed(7);
    models.emplace_back(cfg, kVocab);
    comms.push_back(std::make_shared<ThreadComm>(group, r));
    models.back()->set_tensor_parallel(comms.back(), /*sequence_parallel=*/true);
  }
  std::vector<std::vector<torch::Tensor>> got(static_cast<size_t>(size));
  std::vector<torch::Tensor> logits(static_cast<size_t>(size));
  for (const auto& e : testing::run_ranks(group, [&](int r) {
         got[r] = {decode(models[r], 0.0, true), decode(models[r], 1.0, true), decode(models[r], 0.0, false)};
         comms[r]->sequence_parallel = false;  // forward_cached alone leaves it to the caller
         KVCache cache(cfg.n_layer);
         torch::NoGradGuard no_grad;
         logits[r] = models[r]->forward_cached(prompt, cache);
       })) {
    ASSERT_EQ(e, "");
  }
  for (int r = 0; r < size; ++r) {
    const char* what[] = {"greedy", "sampled", "greedy without the cache"};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(torch::equal(got[r][i], want[i])) << what[i] << ", rank " << r;
    EXPECT_LT((logits[r] - first_logits).abs().max().item<double>(), 1e-5) << "rank " << r;
  }
}

TEST(SplitDecodingGuard, SequenceParallelismComesBackOn) {
  ThreadGroup group(1);
  torch::manual_seed(7);
  GPT model(config_for("gpt2"), kVocab);
  auto comm = std::make_shared<ThreadComm>(group, 0);
  model->set_tensor_parallel(comm, /*sequence_parallel=*/true);
  model->generate(torch::zeros({1, 3}, torch::kLong), 2, 0.0);
  EXPECT_TRUE(comm->sequence_parallel);
}

INSTANTIATE_TEST_SUITE_P(Families, SplitDecoding,
                         ::testing::Values(std::make_tuple("gpt2", 2), std::make_tuple("gpt2", 4),
                                           std::make_tuple("llama", 2)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param));
                         });

TEST(TensorParallel, GroupsThatDoNotDivideTheModelAreRefused) {
  ThreadGroup group(3);
  torch::manual_seed(7);
  GPT model(config_for("gpt2"), kVocab);
  try {
    model->set_tensor_parallel(std::make_shared<ThreadComm>(group, 0));
    FAIL() << "3 ranks cannot split 4 heads";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_head"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hwt
