// Decoding over pipeline stages (GptStage::generate) against the whole model in one process: threads
// play the ranks (support/thread_comm.h), and every rank must get the whole model's tokens, greedy
// and sampled, with the KV cache (5 + 20 tokens past block_size 16: the window slides) and without,
// for GPT-2 (the tied head on the first and last stage) and Llama (GQA), on 2 and 3 stages,
// interleaved (2 stages of 2 chunks), and with each stage's layers split over 2 tensor ranks; and 5
// rows decoded as 2 or 3 micro-batches in flight (4 + 15 tokens, past block_size too) against the
// whole model with the same micro-batches (the same draws in the same order), also in the schedule
// for sends that wait for their receives (NCCL's: one micro-batch at a time).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "hwtrain/model/gpt.h"
#include "hwtrain/model/gpt_stage.h"
#include "model/model_test_util.h"
#include "support/thread_comm.h"

namespace hwt {
namespace stage_generation_test {  // named: the unity build joins the anonymous ones

using testing::ThreadComm;
using testing::ThreadGroup;

constexpr int64_t kVocab = 50;

ModelConfig config_for(const std::string& family) {
  ModelConfig cfg = test::tiny_config(/*n_layer=*/4);
  cfg.n_head = 4;
  if (family == "llama") {
    cfg.architecture = Architecture::kLlama;
    cfg.n_kv_head = 2;
  }
  return cfg;
}

// Stage s's chunks when n_layer blocks are cut evenly into p x v: chunk c is virtual stage c p + s.
StagePlace place_of(int64_t s, int64_t p, int64_t v, int64_t n_layer) {
  StagePlace place{s, p, {}};
  for (int64_t c = 0; c < v; ++c) {
    const int64_t vs = c * p + s, n = p * v;
    place.chunks.push_back({vs * n_layer / n, (vs + 1) * n_layer / n});
  }
  return place;
}

// (family, stages p, chunks per stage v, tensor ranks per stage t)
struct StageDecoding : ::testing::TestWithParam<std::tuple<std::string, int64_t, int64_t, int>> {};

TEST_P(StageDecoding, EveryRankDrawsTheWholeModelsTokens) {
  const auto [family, p, v, t] = GetParam();
  const ModelConfig cfg = config_for(family);
  torch::manual_seed(3);
  const torch::Tensor prompt = torch::randint(kVocab, {2, 5}, torch::kLong);
  const torch::Tensor rows5 = torch::randint(kVocab, {5, 4}, torch::kLong);  // micro-batches of 3 + 2, 2 + 2 + 1
  auto gen = [] { return at::make_generator<at::CPUGeneratorImpl>(11); };
  torch::manual_seed(7);
  GPT whole(cfg, kVocab);
  const std::vector<torch::Tensor> want{whole->generate(prompt, 20, 0.0, 0, gen(), 1.0, true),
                                        whole->generate(prompt, 20, 1.0, 5, gen(), 0.9, true),
                                        whole->generate(prompt, 20, 0.0, 0, gen(), 1.0, false),
                                        whole->generate(rows5, 15, 1.0, 5, gen(), 0.9, true, 2),
                                        whole->generate(rows5, 15, 0.0, 0, gen(), 1.0, true, 3),
                                        whole->generate(rows5, 15, 1.0, 0, gen(), 1.0, false, 3)};

  // Rank s t + k: stage s, tensor rank k. Groups: each stage's tensor ranks, each tensor rank's
  // stages (its pipeline), and the first and last stage of a pipeline (the tied embedding).
  const int n = static_cast<int>(p) * t;
  ThreadGroup world(n);
  std::vector<std::unique_ptr<ThreadGroup>> tensor, line, ends;
  for (int64_t s = 0; s < p; ++s) tensor.push_back(std::make_unique<ThreadGroup>(t));
  for (int k = 0; k < t; ++k) line.push_back(std::make_unique<ThreadGroup>(static_cast<int>(p)));
  for (int k = 0; k < t; ++k) ends.push_back(std::make_unique<ThreadGroup>(2));
  std::vector<ThreadGroup*> subgroups;
  for (auto* list : {&tensor, &line, &ends}) {
    for (auto& g : *list) subgroups.push_back(g.get());
  }
  std::vector<std::shared_ptr<GptStage>> stages;
  std::vector<std::shared_ptr<ThreadComm>> pipelines;  // each rank's view of its pipeline
  for (int r = 0; r < n; ++r) {
    const int64_t s = r / t;
    const int k = r % t;
    torch::manual_seed(7);
    GPT gpt(cfg, kVocab);
    if (t > 1) gpt->set_tensor_parallel(std::make_shared<ThreadComm>(*tensor[s], k), /*sequence_parallel=*/true);
    std::shared_ptr<TensorParallelComm> shared;
    if (cfg.tied_head() && (s == 0 || s == p - 1)) shared = std::make_shared<ThreadComm>(*ends[k], s == 0 ? 0 : 1);
    pipelines.push_back(std::make_shared<ThreadComm>(*line[k], static_cast<int>(s)));
    stages.push_back(std::make_shared<GptStage>(gpt, place_of(s, p, v, cfg.n_layer), pipelines.back(), shared));
  }
  std::vector<std::vector<torch::Tensor>> got(static_cast<size_t>(n));
  const auto errors = testing::run_ranks(world, [&](int r) {
    GptStage& stage = *stages[static_cast<size_t>(r)];
    got[r] = {stage.generate(prompt, 20, 0.0, 0, gen(), 1.0, true), stage.generate(prompt, 20, 1.0, 5, gen(), 0.9, true),
              stage.generate(prompt, 20, 0.0, 0, gen(), 1.0, false),
              stage.generate(rows5, 15, 1.0, 5, gen(), 0.9, true, 2),
              stage.generate(rows5, 15, 0.0, 0, gen(), 1.0, true, 3),
              stage.generate(rows5, 15, 1.0, 0, gen(), 1.0, false, 3)};
    // The schedule for sends that wait for their receives (NCCL): one micro-batch at a time.
    pipelines[static_cast<size_t>(r)]->blocking_sends = true;
    got[r].push_back(stage.generate(rows5, 15, 1.0, 5, gen(), 0.9, true, 2));
    got[r].push_back(stage.generate(rows5, 15, 0.0, 0, gen(), 1.0, false, 3));
    pipelines[static_cast<size_t>(r)]->blocking_sends = false;
  }, subgroups);
  for (const auto& e : errors) ASSERT_EQ(e, "");
  for (int r = 0; r < n; ++r) {
    const char* what[] = {"greedy", "sampled (top-k 5, top-p 0.9)", "greedy without the cache",
                          "5 rows in 2 micro-batches, sampled", "5 rows in 3 micro-batches, greedy",
                          "5 rows in 3 micro-batches, sampled without the cache",
                          "in turn (NCCL's schedule): 5 rows in 2 micro-batches, sampled",
                          "in turn: 5 rows in 3 micro-batches, greedy without the cache"};
    ASSERT_EQ(got[r].size(), want.size() + 2);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(torch::equal(got[r][i], want[i])) << what[i] << ", rank " << r;
    EXPECT_TRUE(torch::equal(got[r][6], want[3])) << what[6] << ", rank " << r;
    const torch::Tensor greedy_no_cache = whole->generate(rows5, 15, 0.0, 0, gen(), 1.0, false, 3);
    EXPECT_TRUE(torch::equal(got[r][7], greedy_no_cache)) << what[7] << ", rank " << r;
    if (t > 1) {
      EXPECT_TRUE(stages[r]->gpt()->tensor_parallel()->sequence_parallel) << "restored after decoding";
    }
    EXPECT_TRUE(stages[r]->gpt()->is_training()) << "the training mode restored";
    EXPECT_TRUE(stages[r]->gpt()->h[place_of(r / t, p, v, cfg.n_layer).chunks[0].begin]->is_training()) << "and the blocks'";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, StageDecoding,
                         ::testing::Values(std::make_tuple("gpt2", 2, 1, 1), std::make_tuple("gpt2", 3, 1, 1),
                                           std::make_tuple("llama", 2, 1, 1), std::make_tuple("gpt2", 2, 2, 1),
                                           std::make_tuple("llama", 2, 1, 2), std::make_tuple("gpt2", 2, 1, 2)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_pp" + std::to_string(std::get<1>(info.param)) + "_v" +
                                  std::to_string(std::get<2>(info.param)) + "_tp" + std::to_string(std::get<3>(info.param));
                         });

}  // namespace stage_generation_test
}  // namespace hwt
