// Pipeline parallelism in one process: threads play the stages (support/thread_comm.h), each a
// GptStage of the same whole model, and one step of the 1F1B schedule must give the whole model's
// mean loss and every gradient within 1e-5 (fp32, gradient accumulation over the micro-batches),
// for GPT-2 (tied head: the embedding's copies on the first and last stage summed) and Llama, on 2
// and 3 stages, with activation checkpointing, and interleaved (2 stages of 2 chunks each). Also
// the schedules themselves: each stage runs every micro-batch forward then backward, 1F1B holds at
// most p - s in flight and warms up p - s - 1; the interleaved one, simulated over all stages with
// blocking receives, never deadlocks, and its bubble is smaller than 1F1B's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hwtrain/core/error.h"
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

// Every stage's schedule run in lock-step rounds, each action taking one round once its input is
// there (a forward needs the previous virtual stage's forward, a backward the next one's backward,
// both from an earlier round): the rounds the step takes, or -1 when no stage can move (a deadlock).
int64_t simulate_rounds(int64_t p, int64_t v, int64_t m) {
  std::vector<std::vector<PipeAction>> plans;
  for (int64_t s = 0; s < p; ++s) plans.push_back(pipeline_schedule(s, p, v, m));
  const int64_t n = p * v;  // virtual stages
  std::vector<std::vector<int64_t>> fwd(n, std::vector<int64_t>(m, -1)), bwd = fwd;  // the round each finished
  std::vector<size_t> next(p, 0);
  for (int64_t round = 0;; ++round) {
    bool moved = false, done = true;
    for (int64_t s = 0; s < p; ++s) {
      if (next[s] == plans[s].size()) continue;
      done = false;
      const PipeAction& a = plans[s][next[s]];
      const int64_t vs = a.chunk * p + s;
      const bool tokens = a.op == PipeOp::Forward && vs == 0;  // there from the start
      const int64_t input = a.op == PipeOp::Forward ? (tokens ? 0 : fwd[vs - 1][a.micro])
                                                    : (vs == n - 1 ? fwd[vs][a.micro] : bwd[vs + 1][a.micro]);
      if (!tokens && (input < 0 || input >= round)) continue;
      (a.op == PipeOp::Forward ? fwd : bwd)[vs][a.micro] = round;
      ++next[s];
      moved = true;
    }
    if (done) return round;
    if (!moved) return -1;
  }
}

TEST(InterleavedOneFOneB, EveryChunkRunsEveryMicroBatchWithoutDeadlockAndASmallerBubble) {
  for (int64_t p = 2; p <= 4; ++p) {
    for (int64_t v = 1; v <= 3; ++v) {
      for (int64_t m = p; m <= 3 * p; m += p) {
        for (int64_t s = 0; s < p; ++s) {
          const auto actions = pipeline_schedule(s, p, v, m);
          ASSERT_EQ(static_cast<int64_t>(actions.size()), 2 * m * v);
          std::vector<int> state(static_cast<size_t>(m * v), 0);
          int64_t in_flight = 0, most = 0;  // chunk-forwards whose activations are held
          for (const auto& a : actions) {
            int& st = state[static_cast<size_t>(a.chunk * m + a.micro)];
            EXPECT_EQ(st, a.op == PipeOp::Forward ? 0 : 1) << "p " << p << " v " << v << " m " << m << " s " << s;
            ++st;
            in_flight += a.op == PipeOp::Forward ? 1 : -1;
            most = std::max(most, in_flight);
          }
          // The memory docs/parallelism.md states: the warm-up's forwards and one more (with m = p every
          // forward warms up, as Megatron-LM does; stage 0 holds them all in either case).
          const int64_t bound = v == 1 ? p - s : m == p ? m * v : 2 * (p - s - 1) + (v - 1) * p + 1;
          EXPECT_EQ(most, std::min(bound, m * v)) << "p " << p << " v " << v << " m " << m << " s " << s;
          EXPECT_EQ(actions.back().op, PipeOp::Backward);
        }
        const int64_t rounds = simulate_rounds(p, v, m);
        ASSERT_GT(rounds, 0) << "deadlock at p " << p << " v " << v << " m " << m;
        // A chunk's forward or backward is 1/v of a stage's: v rounds make a whole stage's work.
        if (v > 1) {
          EXPECT_LT(static_cast<double>(rounds) / v, simulate_rounds(p, 1, m)) << "p " << p << " v " << v << " m " << m;
        }
      }
    }
  }
  EXPECT_THROW(pipeline_schedule(0, 2, 2, 3), ConfigError);  // 3 micro-batches do not group by 2 stages
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

// A stage cut from a deferred GPT (model/deferred_init.h) fills only its own weights, with the values
// of the ordinary build; the other stages' weights are never filled (GPT-2's tied embedding is the
// first and last stage's both).
TEST(DeferredStage, FillsOnlyItsOwnWeightsWithTheOrdinaryValues) {
  for (const std::string family : {"gpt2", "llama"}) {
    const ModelConfig cfg = config_for(family);
    torch::manual_seed(9);
    GPT whole(cfg, kVocab);
    const std::vector<StageRange> cut = split_decoder(cfg, kVocab, 2);
    ThreadGroup line(2), ends(2);
    for (int s = 0; s < 2; ++s) {
      torch::manual_seed(9);
      GPT gpt(cfg, kVocab, AttentionKernel::Sdpa, std::make_shared<DeferredInit>());
      std::shared_ptr<TensorParallelComm> shared;
      if (cfg.tied_head()) shared = std::make_shared<ThreadComm>(ends, s);
      GptStage stage(gpt, StagePlace{s, 2, {{cut[s].begin, cut[s].end}}}, std::make_shared<ThreadComm>(line, s), shared);
      gpt->materialize_parameters();
      int64_t kept = 0;
      for (const auto& item : stage.module().named_parameters()) kept += item.value().numel();
      int64_t filled = 0;
      for (const auto& item : gpt->named_parameters()) {
        if (item.value().numel() == 0) continue;  // another stage's
        EXPECT_FALSE(is_placeholder(item.value())) << item.key();
        EXPECT_TRUE(torch::equal(item.value(), *whole->named_parameters().find(item.key()))) << family << " " << item.key();
        filled += item.value().numel();
      }
      EXPECT_EQ(filled, kept) << family << " stage " << s;
      EXPECT_LT(filled, whole->num_parameters(false)) << family << " stage " << s;
    }
  }
}

// (family, stages, activation checkpointing every k blocks, chunks per stage)
struct PipelineCase : ::testing::TestWithParam<std::tuple<std::string, int64_t, int64_t, int64_t>> {};

TEST_P(PipelineCase, OneStepEqualsTheWholeModelsAccumulatedStep) {
  const auto [family, p, every_k, v] = GetParam();
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

  const std::vector<StageRange> cut = split_decoder(cfg, kVocab, p * v);
  ThreadGroup line(static_cast<int>(p)), ends(2);
  std::vector<std::shared_ptr<GptStage>> stages;
  for (int64_t s = 0; s < p; ++s) {
    torch::manual_seed(9);
    GPT gpt(cfg, kVocab);
    gpt->set_activation_checkpointing(every_k);
    std::shared_ptr<TensorParallelComm> shared;
    if (cfg.tied_head() && (s == 0 || s == p - 1)) shared = std::make_shared<ThreadComm>(ends, s == 0 ? 0 : 1);
    StagePlace place{s, p, {}};
    for (int64_t c = 0; c < v; ++c) place.chunks.push_back({cut[c * p + s].begin, cut[c * p + s].end});
    stages.push_back(std::make_shared<GptStage>(gpt, place, std::make_shared<ThreadComm>(line, static_cast<int>(s)), shared));
  }
  std::vector<double> losses(static_cast<size_t>(p));
  std::vector<std::thread> threads;
  for (int64_t s = 0; s < p; ++s) {
    threads.emplace_back([&, s] {
      GptStage& stage = *stages[s];
      PipelineStepHooks hooks;
      hooks.forward = [&](const torch::Tensor& in, const torch::Tensor& t, int64_t c) { return stage.forward_stage(in, t, c); };
      hooks.backward_loss = [](const torch::Tensor& loss) { (loss / static_cast<double>(kMicroBatches)).backward(); };
      hooks.before_backward = [](bool) {};
      StepMetrics m;
      m.forward_seconds = m.backward_seconds = 0;
      losses[s] = run_pipeline_step(stage, x, y, kMicro, kMicroBatches, torch::kCPU, hooks, m);
      stage.sum_shared_gradients(stage.own_gradients());  // the tied embedding's two copies
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

// A stage's line to its neighbours whose sends complete only once received (as NCCL's; a wait that
// comes too early fails instead of hanging), counting the sends not yet waited for (each holds its tensor).
class CountingComm : public ThreadComm {
 public:
  CountingComm(ThreadGroup& group, int rank) : ThreadComm(group, rank), group_(group), rank_(rank) {}
  std::function<void()> send_async(const torch::Tensor& t, int peer, int tag) override {
    const int64_t seq = group_.post(rank_, peer, tag, t);
    most = std::max(most, ++outstanding_);
    auto waited = std::make_shared<bool>(false);
    return [this, waited, peer, tag, seq] {
      if (*waited) return;
      group_.wait_taken(rank_, peer, tag, seq, std::chrono::seconds(20));
      --outstanding_;
      *waited = true;
    };
  }
  int most = 0;  // sends in flight at once

 private:
  ThreadGroup& group_;
  int rank_;
  int outstanding_ = 0;
};

// Each send is waited for as soon as its receipt is certain, never before (a send that blocks until
// received would fail the step), so a stage holds a few boundary tensors, not every micro-batch's
// activation and gradient until the end of the step.
TEST(PipelineSends, AreWaitedForAsSoonAsTheyAreReceivedNotAtTheEnd) {
  const ModelConfig cfg = config_for("llama");
  constexpr int64_t m = 16;
  torch::manual_seed(5);
  const torch::Tensor x = torch::randint(kVocab, {kMicro * m, 12}, torch::kLong);
  const torch::Tensor y = torch::randint(kVocab, {kMicro * m, 12}, torch::kLong);
  for (const auto& [p, v] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {3, 1}, {4, 1}, {2, 2}}) {
    const std::vector<StageRange> cut = split_decoder(cfg, kVocab, p * v);
    ThreadGroup line(static_cast<int>(p));
    std::vector<std::shared_ptr<GptStage>> stages;
    std::vector<std::shared_ptr<CountingComm>> comms;
    for (int64_t s = 0; s < p; ++s) {
      torch::manual_seed(9);
      GPT gpt(cfg, kVocab);
      StagePlace place{s, p, {}};
      for (int64_t c = 0; c < v; ++c) place.chunks.push_back({cut[c * p + s].begin, cut[c * p + s].end});
      comms.push_back(std::make_shared<CountingComm>(line, static_cast<int>(s)));
      stages.push_back(std::make_shared<GptStage>(gpt, place, comms.back(), nullptr));
    }
    const std::vector<std::string> errors = testing::run_ranks(line, [&](int s) {
      GptStage& stage = *stages[static_cast<size_t>(s)];
      PipelineStepHooks hooks;
      hooks.forward = [&](const torch::Tensor& in, const torch::Tensor& t, int64_t c) {
        return stage.forward_stage(in, t, c);
      };
      hooks.backward_loss = [](const torch::Tensor& loss) { (loss / static_cast<double>(m)).backward(); };
      hooks.before_backward = [](bool) {};
      StepMetrics metrics;
      run_pipeline_step(stage, x, y, kMicro, m, torch::kCPU, hooks, metrics);
    });
    for (int64_t s = 0; s < p; ++s) {
      EXPECT_EQ(errors[static_cast<size_t>(s)], "") << "p " << p << " v " << v << " stage " << s;
      // 1F1B: the activations the schedule holds anyway (p - s) and two gradients; interleaved (in
      // ticks, train/pipeline_ticks.h) a tick's activation and gradient, every send waited for in
      // its tick. All m x v of each direction were once held to the end (16 and 48 here).
      const int64_t bound = v == 1 ? p - s + 2 : 2;
      EXPECT_LE(comms[static_cast<size_t>(s)]->most, bound) << "p " << p << " v " << v << " stage " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PipelineCase,
                         ::testing::Values(std::make_tuple("gpt2", 2, 0, 1), std::make_tuple("gpt2", 3, 1, 1),
                                           std::make_tuple("llama", 2, 1, 1), std::make_tuple("llama", 4, 0, 1),
                                           std::make_tuple("gpt2", 2, 1, 2), std::make_tuple("llama", 2, 0, 2)),
                         [](const auto& info) {
                           const int64_t v = std::get<3>(info.param);
                           return std::get<0>(info.param) + "_pp" + std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_checkpointed" : "") +
                                  (v > 1 ? "_interleaved" + std::to_string(v) : "");
                         });

}  // namespace
}  // namespace hwt
