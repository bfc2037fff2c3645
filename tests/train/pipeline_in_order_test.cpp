// The pipeline step under NCCL's point-to-point rules (support/in_order_comm.h: untagged messages,
// sends that complete once received, each rank's groups in one order): 1F1B on 2, 3 and 4 stages,
// with fewer micro-batches than stages too, and interleaved 1F1B (in ticks, train/pipeline_ticks.h)
// on 2, 3 and 4 stages of 2 and 3 chunks, never wait forever and give every gradient and the loss
// bit for bit as over a transport whose sends never wait (tagged mailboxes, Gloo's semantics), and
// within 1e-5 of one process's accumulated step; so does evaluation through the stages after it
// (GptStage::forward_loss, each send waited for at once). Without grouping each send with the
// receive that follows it 1F1B hung there, and interleaving with held sends did.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <tuple>
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
  std::vector<double> losses, eval_losses;  // eval: micro-batch 0, forward only (GptStage::forward_loss)
  std::vector<std::vector<torch::Tensor>> grads;  // per stage, in parameter order
  std::vector<std::vector<std::string>> names;    // their names
};

// How the stages talk: tagged mailboxes whose sends never wait (Gloo's semantics), or NCCL's rules.
enum class LineKind { kTagged, kInOrder };

// One step of p stages of v chunks over m micro-batches.
LineStep run_line_step(int64_t p, int64_t v, int64_t m, LineKind how) {
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
    if (how == LineKind::kInOrder) {
      comm = std::make_shared<testing::InOrderComm>(line, static_cast<int>(s), std::chrono::seconds(10));
    } else {
      comm = std::make_shared<ThreadComm>(line, static_cast<int>(s));
    }
    stages.push_back(std::make_shared<GptStage>(gpt, place, comm, nullptr));
  }
  LineStep r;
  r.losses.assign(static_cast<size_t>(p), 0.0);
  r.eval_losses = r.losses;
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
    torch::NoGradGuard no_grad;
    r.eval_losses[static_cast<size_t>(s)] =
        stage.forward_loss(x.narrow(0, 0, kLineMicro), y.narrow(0, 0, kLineMicro)).item<double>();
  });
  for (const auto& stage : stages) {
    r.grads.emplace_back();
    r.names.emplace_back();
    for (const auto& item : stage->module().named_parameters()) {
      r.grads.back().push_back(item.value().grad());
      r.names.back().push_back(item.key());
    }
  }
  return r;
}

// One process: the whole model's loss and gradients accumulated over the same m micro-batches,
// compared with each stage's (each weight on exactly one stage).
void expect_whole_model_step(int64_t p, int64_t v, int64_t m, const LineStep& got, const std::string& where) {
  const ModelConfig cfg = line_config(p * v);
  torch::manual_seed(5);
  const torch::Tensor x = torch::randint(kLineVocab, {kLineMicro * m, 12}, torch::kLong);
  const torch::Tensor y = torch::randint(kLineVocab, {kLineMicro * m, 12}, torch::kLong);
  torch::manual_seed(9);
  GPT whole(cfg, kLineVocab);
  double loss = 0;
  for (int64_t k = 0; k < m; ++k) {
    const int64_t row = k * kLineMicro;
    const auto l = whole->forward_loss(x.narrow(0, row, kLineMicro), y.narrow(0, row, kLineMicro));
    (l / static_cast<double>(m)).backward();
    loss += l.item<double>() / static_cast<double>(m);
  }
  torch::NoGradGuard no_grad;
  const double eval = whole->forward_loss(x.narrow(0, 0, kLineMicro), y.narrow(0, 0, kLineMicro)).item<double>();
  auto reference = whole->named_parameters();
  size_t checked = 0;
  for (size_t s = 0; s < got.names.size(); ++s) {
    EXPECT_NEAR(got.losses[s], loss, 1e-5) << where;
    EXPECT_NEAR(got.eval_losses[s], eval, 1e-5) << where << " (evaluation)";
    for (size_t k = 0; k < got.names[s].size(); ++k, ++checked) {
      const torch::Tensor& want = reference[got.names[s][k]].grad();
      EXPECT_LT((got.grads[s][k] - want).abs().max().item<double>(), 1e-5) << where << " " << got.names[s][k];
    }
  }
  EXPECT_EQ(checked, reference.size()) << where;
}

void expect_same_step(const LineStep& want, const LineStep& got, const std::string& where) {
  for (size_t i = 0; i < want.errors.size(); ++i) {
    ASSERT_EQ(want.errors[i], "");
    EXPECT_EQ(got.errors[i], "") << where << " stage " << i;
    if (!got.errors[i].empty()) continue;
    EXPECT_EQ(got.losses[i], want.losses[i]) << where;
    EXPECT_EQ(got.eval_losses[i], want.eval_losses[i]) << where << " (evaluation)";
    ASSERT_EQ(got.grads[i].size(), want.grads[i].size());
    for (size_t k = 0; k < want.grads[i].size(); ++k) {
      ASSERT_TRUE(got.grads[i][k].defined()) << where;
      EXPECT_TRUE(torch::equal(got.grads[i][k], want.grads[i][k])) << where << " stage " << i;
    }
  }
}

TEST(PipelineInOrder, NcclsRulesNeverHangAndKeepEveryGradientToTheBit) {
  for (const auto& [p, v, m] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {2, 1, 1}, {2, 1, 4}, {3, 1, 1}, {3, 1, 2}, {3, 1, 5}, {4, 1, 3}, {4, 1, 8}}) {
    const std::string where = "p " + std::to_string(p) + " v " + std::to_string(v) + " m " + std::to_string(m);
    const LineStep want = run_line_step(p, v, m, LineKind::kTagged);
    expect_whole_model_step(p, v, m, want, where);
    expect_same_step(want, run_line_step(p, v, m, LineKind::kInOrder), where);
  }
}

// Interleaved, held sends wait for each other around the ring of virtual stages under NCCL's rules;
// in ticks they do not, at every count of micro-batches the schedule takes (m = p runs every forward
// first).
TEST(PipelineInOrder, InterleavedInTicksNeverHangsAndKeepsEveryGradientToTheBit) {
  for (const auto& [p, v, m] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {2, 2, 2}, {2, 2, 4}, {2, 3, 6}, {3, 2, 3}, {3, 2, 6}, {3, 3, 9}, {4, 2, 4}, {4, 2, 8}}) {
    const std::string where = "p " + std::to_string(p) + " v " + std::to_string(v) + " m " + std::to_string(m);
    const LineStep want = run_line_step(p, v, m, LineKind::kTagged);
    expect_whole_model_step(p, v, m, want, where);
    expect_same_step(want, run_line_step(p, v, m, LineKind::kInOrder), where);
  }
}

}  // namespace
}  // namespace hwt
