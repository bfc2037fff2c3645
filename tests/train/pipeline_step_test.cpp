// Pipeline parallelism in one process: threads play the stages (support/thread_comm.h), each a
// GptStage of the same whole model, and one step of the 1F1B schedule must give the whole model's
// mean loss and every gradient within 1e-5 (fp32, gradient accumulation over the micro-batches),
// for GPT-2 (tied head: the embedding's copies on the first and last stage summed) and Llama, on 2
// and 3 stages, with activation checkpointing. Also the schedule itself: each stage runs every
// micro-batch forward then backward, holds at most p - s in flight, and warms up p - s - 1.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "hwtrain/model/gpt.h"
#include "hwtrain/model/gpt_stage.h"
#include "hwtrain/plan/stage_split.h"
#include "hwtrain/train/pipeline_step.h"
#include "support/thread_comm.h"

namespace hwt {
namespace {

using testing::ThreadComm;
using testing::ThreadGroup;

TEST(OneFOneB, EveryMicroBatchRunsForwardThenBackwardWithBoundedActivations) {
  for (int64_t p = 1; p <= 4; ++p) {
    for (int64_t m = 1; m <= 8; ++m) {
      for (int64_t s = 0; s < p; ++s) {
        const auto actions = one_f_one_b(s, p, m);
        ASSERT_EQ(static_cast<int64_t>(actions.size()), 2 * m);
        std::vector<int> state(static_cast<size_t>(m), 0);  // 0 none, 1 forward done, 2 backward done
        int64_t in_flight = 0, most = 0, next_forward = 0, next_backward = 0;
        for (const auto& a : actions) {
          if (a.op == PipeOp::Forward) {
            EXPECT_EQ(a.micro, next_forward++);
            ++in_flight;
          } else {
            EXPECT_EQ(a.micro, next_backward++);
            EXPECT_EQ(state[static_cast<size_t>(a.micro)], 1);
            --in_flight;
          }
          state[static_cast<size_t>(a.micro)] += 1;
          most = std::max(most, in_flight);
        }
        EXPECT_LE(most, std::min(p - s, m)) << "p " << p << " m " << m << " s " << s;
        int64_t warmup = 0;
        while (warmup < 2 * m && actions[static_cast<size_t>(warmup)].op == PipeOp::Forward) ++warmup;
        EXPECT_EQ(warmup, std::min(p - s, m)) << "warm-up forwards and the first steady one";
      }
    }
  }
}

ModelConfig config_for(const std::string& family) {
  ModelConfig cfg;
  cfg.preset = "";
  cfg.n_layer = 4;
  cfg.n_head = 2;
  cfg.n_embd = 32;
  cfg.block_size = 16;
  cfg.dropout = 0.0;
  if (family == "llama") {
    cfg.architecture = Architecture::kLlama;
    cfg.n_kv_head = 1;
  }
  return cfg;
}

constexpr int64_t kVocab = 40, kMicro = 2, kMicroBatches = 4;

struct PipelineCase : ::testing::TestWithParam<std::tuple<std::string, int64_t, int64_t>> {};

TEST_P(PipelineCase, OneStepEqualsTheWholeModelsAccumulatedStep) {
  const auto [family, p, every_k] = GetParam();
  const ModelConfig cfg = config_for(family);
  torch::manual_seed(5);
  const torch::Tensor x = torch::randint(kVocab, {kMicro * kMicroBatches, 12}, torch::kLong);
  const torch::Tensor y = torch::randint(kVocab, {kMicro * kMicroBatches, 12}, torch::kLong);

  torch::manual_seed(9);
  GPT whole(cfg, kVocab);
  whole->set_activation_checkpointing(every_k);
  double whole_loss = 0;
  for (int64_t k = 0; k < kMicroBatches; ++k) {
    auto loss = whole->forward_loss(x.narrow(0, k * kMicro, kMicro), y.narrow(0, k * kMicro, kMicro));
    (loss / static_cast<double>(kMicroBatches)).backward();
    whole_loss += loss.item<double>() / kMicroBatches;
  }

  const std::vector<StageRange> cut = split_decoder(cfg, kVocab, p);
  ThreadGroup line(static_cast<int>(p)), ends(2);
  std::vector<std::shared_ptr<GptStage>> stages;
  for (int64_t s = 0; s < p; ++s) {
    torch::manual_seed(9);
    GPT gpt(cfg, kVocab);
    gpt->set_activation_checkpointing(every_k);
    std::shared_ptr<TensorParallelComm> shared;
    if (cfg.tied_head() && (s == 0 || s == p - 1)) shared = std::make_shared<ThreadComm>(ends, s == 0 ? 0 : 1);
    stages.push_back(std::make_shared<GptStage>(gpt, StagePlace{s, p, cut[s].begin, cut[s].end},
                                                std::make_shared<ThreadComm>(line, static_cast<int>(s)), shared));
  }
  std::vector<double> losses(static_cast<size_t>(p));
  std::vector<std::thread> threads;
  for (int64_t s = 0; s < p; ++s) {
    threads.emplace_back([&, s] {
      GptStage& stage = *stages[s];
      PipelineStepHooks hooks;
      hooks.forward = [&](const torch::Tensor& in, const torch::Tensor& t) { return stage.forward_stage(in, t); };
      hooks.backward_loss = [](const torch::Tensor& loss) { (loss / static_cast<double>(kMicroBatches)).backward(); };
      hooks.before_backward = [](bool) {};
      StepMetrics m;
      m.forward_seconds = m.backward_seconds = 0;
      losses[s] = run_pipeline_step(stage, x, y, kMicro, kMicroBatches, torch::kCPU, hooks, m);
      stage.sum_shared_gradients();  // the tied embedding's two copies
    });
  }
  for (auto& t : threads) t.join();

  auto reference = whole->named_parameters();
  int checked = 0;
  for (int64_t s = 0; s < p; ++s) {
    EXPECT_NEAR(losses[s], whole_loss, 1e-5) << "stage " << s;
    for (const auto& item : stages[s]->module().named_parameters()) {
      const torch::Tensor& expected = reference[item.key()].grad();
      ASSERT_TRUE(item.value().grad().defined()) << item.key();
      EXPECT_LT((item.value().grad() - expected).abs().max().item<double>(), 1e-5) << item.key() << " stage " << s;
      ++checked;
    }
  }
  const int64_t tied_copy = cfg.tied_head() ? 1 : 0;
  EXPECT_EQ(checked, static_cast<int>(reference.size() + tied_copy)) << "every weight on exactly one stage";
}

INSTANTIATE_TEST_SUITE_P(Families, PipelineCase,
                         ::testing::Values(std::make_tuple("gpt2", 2, 0), std::make_tuple("gpt2", 3, 1),
                                           std::make_tuple("llama", 2, 1), std::make_tuple("llama", 4, 0)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_pp" + std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_checkpointed" : "");
                         });

}  // namespace
}  // namespace hwt
