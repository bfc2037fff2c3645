// The pipeline step under NCCL's point-to-point rules (support/in_order_comm.h: untagged messages,
// sends that complete once received, each rank's groups in one order): 1F1B on 2, 3 and 4 stages,
// with fewer micro-batches than stages too, never waits forever and gives every gradient and the
// loss bit for bit as over a transport whose sends never wait (the tagged mailboxes Gloo's semantics
// stand for); without grouping each send with the receive that follows it, each of these hung.
// Interleaving is refused there.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/model/gpt.h"
#include "hwtrain/model/gpt_stage.h"
#include "hwtrain/plan/stage_split.h"
#include "hwtrain/train/pipeline_step.h"
#include "support/in_order_comm.h"
#include "support/thread_comm.h"

namespace hwt {
namespace {

using testing::ThreadComm;
using testing::ThreadGroup;

constexpr int64_t kLineVocab = 40, kLineMicro = 2;

ModelConfig line_config(int64_t layers) {
  ModelConfig cfg;
  cfg.preset = "";
  cfg.architecture = Architecture::kLlama;
  cfg.n_layer = layers;
  cfg.n_head = 2;
  cfg.n_kv_head = 1;
  cfg.n_embd = 32;
  cfg.block_size = 16;
  cfg.dropout = 0.0;
  return cfg;
}

struct LineStep {
  std::vector<std::string> errors;
  std::vector<double> losses;
  std::vector<std::vector<torch::Tensor>> grads;  // per stage, in parameter order
};

// One step of p stages of v chunks over m micro-batches; `in_order`: the NCCL-like line.
LineStep run_line_step(int64_t p, int64_t v, int64_t m, bool in_order) {
  const ModelConfig cfg = line_config(p * v);
  torch::manual_seed(5);
  const torch::Tensor x = torch::randint(kLineVocab, {kLineMicro * m, 12}, torch::kLong);
  const torch::Tensor y = torch::randint(kLineVocab, {kLineMicro * m, 12}, torch::kLong);
  const std::vector<StageRange> cut = split_decoder(cfg, kLineVocab, p * v);
  ThreadGroup line(static_cast<int>(p));
  std::vector<std::shared_ptr<GptStage>> stages;
  for (int64_t s = 0; s < p; ++s) {
    torch::manual_seed(9);
    GPT gpt(cfg, kLineVocab);
    StagePlace place{s, p, {}};
    for (int64_t c = 0; c < v; ++c) place.chunks.push_back({cut[c * p + s].begin, cut[c * p + s].end});
    std::shared_ptr<TensorParallelComm> comm;
    if (in_order) {
      comm = std::make_shared<testing::InOrderComm>(line, static_cast<int>(s), std::chrono::seconds(10));
    } else {
      comm = std::make_shared<ThreadComm>(line, static_cast<int>(s));
    }
    stages.push_back(std::make_shared<GptStage>(gpt, place, comm, nullptr));
  }
  LineStep r;
  r.losses.assign(static_cast<size_t>(p), 0.0);
  r.errors = testing::run_ranks(line, [&](int s) {
    GptStage& stage = *stages[static_cast<size_t>(s)];
    PipelineStepHooks hooks;
    hooks.forward = [&](const torch::Tensor& in, const torch::Tensor& t, int64_t c) {
      return stage.forward_stage(in, t, c);
    };
    hooks.backward_loss = [m](const torch::Tensor& loss) { (loss / static_cast<double>(m)).backward(); };
    hooks.before_backward = [](bool) {};
    StepMetrics metrics;
    r.losses[static_cast<size_t>(s)] = run_pipeline_step(stage, x, y, kLineMicro, m, torch::kCPU, hooks, metrics);
  });
  for (const auto& stage : stages) {
    r.grads.emplace_back();
    for (const auto& item : stage->module().named_parameters()) r.grads.back().push_back(item.value().grad());
  }
  return r;
}

TEST(PipelineInOrder, NcclsRulesNeverHangAndKeepEveryGradientToTheBit) {
  for (const auto& [p, v, m] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {2, 1, 1}, {2, 1, 4}, {3, 1, 1}, {3, 1, 2}, {3, 1, 5}, {4, 1, 3}, {4, 1, 8}}) {
    const LineStep want = run_line_step(p, v, m, false);
    const LineStep got = run_line_step(p, v, m, true);
    for (int64_t s = 0; s < p; ++s) {
      const auto i = static_cast<size_t>(s);
      ASSERT_EQ(want.errors[i], "");
      EXPECT_EQ(got.errors[i], "") << "p " << p << " v " << v << " m " << m << " stage " << s;
      if (!got.errors[i].empty()) continue;
      EXPECT_EQ(got.losses[i], want.losses[i]);
      ASSERT_EQ(got.grads[i].size(), want.grads[i].size());
      for (size_t k = 0; k < want.grads[i].size(); ++k) {
        ASSERT_TRUE(got.grads[i][k].defined());
        EXPECT_TRUE(torch::equal(got.grads[i][k], want.grads[i][k])) << "p " << p << " v " << v << " stage " << s;
      }
    }
  }
}

// Interleaved, the stages' send + receive groups wait for each other around the ring of virtual
// stages (and over two stages the two directions' orders differ, which only tags keep apart): over
// NCCL's rules the step is refused at once, naming the key, instead of hanging.
TEST(PipelineInOrder, InterleavingIsRefusedWhereSendsWaitForTheirReceives) {
  for (const auto& [p, m] : std::vector<std::pair<int64_t, int64_t>>{{2, 4}, {3, 6}}) {
    const LineStep got = run_line_step(p, 2, m, true);
    for (const std::string& error : got.errors) {
      EXPECT_NE(error.find("dist.pipeline_chunks = 2 (interleaved 1F1B) cannot run over NCCL"), std::string::npos)
          << error;
    }
  }
}

}  // namespace
}  // namespace hwt
