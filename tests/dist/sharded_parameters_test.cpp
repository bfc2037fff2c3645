// ShardedParameters on 2 Gloo ranks, driven by hand as the GPT drives it: ZeRO-3 holds only the
// master shards between units and at most the running unit plus the prefetched one gathered; a
// unit's parameters are whole during its forward and backward; the segments' gradients are the
// ranks' average; the whole weights and optimizer state come back from the shards; ZeRO-2 keeps
// the parameters whole and refreshes them from the masters after the step.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "dist/dist_test_util.h"
#include "hwtrain/core/error.h"
#include "hwtrain/dist/sharded_parameters.h"
#include "hwtrain/dist/zero1.h"
#include "hwtrain/obs/host_allocation_counter.h"

namespace hwt {
namespace {

// Three units in forward order: a "rest" of two odd-sized tensors used first and last (as a tied
// embedding is), then two "blocks" of a (w x w) weight and a w-bias (w = 5 unless asked).
std::vector<ShardedUnitParams> make_units(int64_t w = 5) {
  torch::manual_seed(3);
  std::vector<ShardedUnitParams> units;
  units.push_back(
      {"rest", {{"emb", torch::randn({3, w}).requires_grad_()}, {"scale", torch::randn({w + 2}).requires_grad_()}}, {}});
  for (int b = 0; b < 2; ++b) {
    units.push_back({"h." + std::to_string(b),
                     {{"h." + std::to_string(b) + ".w", torch::randn({w, w}).requires_grad_()},
                      {"h." + std::to_string(b) + ".b", torch::randn({w}).requires_grad_()}},
                     {}});
  }
  return units;
}

// The "model": rest's embedding row sum, then two blocks x -> tanh(x W + b), then a scaled sum.
torch::Tensor forward(ShardedParameters& s, std::vector<ShardedUnitParams>& u, const torch::Tensor& x) {
  s.begin_forward();
  s.before_forward(0);
  torch::Tensor h = x + u[0].params[0].second.sum(0);
  for (size_t b = 1; b <= 2; ++b) {
    s.before_forward(b);
    h = torch::tanh(torch::mm(h, u[b].params[0].second) + u[b].params[1].second);
    h = s.after_forward(b, h);
  }
  return (h * u[0].params[1].second.narrow(0, 0, h.size(1))).sum();
}

TEST(DistWorker, ShardedZero3) {
  HWT_WORKER_ONLY();
  auto group = testing::worker_group();
  const int rank = group->rank();
  std::vector<ShardedUnitParams> units = make_units(), reference = make_units();
  ShardingOptions o;
  o.stage = ShardStage::Zero3;
  ShardedParameters s(group, units, o);
  EXPECT_EQ(s.gathered_bytes(), 0);
  EXPECT_EQ(s.master_bytes(), (11 + 15 + 15) * 4);  // ceil(22/2), ceil(30/2), ceil(30/2) fp32
  const int64_t block_bytes = 30 * 4, rest_bytes = 22 * 4;

  // Each rank its own input; the reference averages both ranks' gradients in one process.
  const torch::Tensor x0 = torch::full({4, 5}, 0.1), x1 = torch::full({4, 5}, -0.2);
  s.begin_micro_step(true);
  torch::Tensor loss = forward(s, units, rank == 0 ? x0 : x1);
  EXPECT_LE(s.gathered_bytes(), rest_bytes + block_bytes);  // rest, and the last block only
  loss.backward();
  s.finish();
  EXPECT_EQ(s.gathered_bytes(), 0);  // every unit freed once its gradients were reduced
  EXPECT_LE(s.stats().peak_gathered_bytes, rest_bytes + 2 * block_bytes);
  EXPECT_EQ(s.stats().reduce_scatters, 3);

  // The reference: plain autograd over both inputs, averaged.
  std::map<std::string, torch::Tensor> want;
  for (const torch::Tensor& x : {x0, x1}) {
    torch::Tensor h = x + reference[0].params[0].second.sum(0);
    for (size_t b = 1; b <= 2; ++b) h = torch::tanh(torch::mm(h, reference[b].params[0].second) + reference[b].params[1].second);
    (h * reference[0].params[1].second.narrow(0, 0, 5)).sum().div(2).backward();
  }
  for (const auto& u : reference) {
    for (const auto& [name, p] : u.params) want[name] = p.grad().reshape(-1);
  }
  for (const auto& seg : s.segments()) {
    ASSERT_TRUE(seg.master.grad().defined()) << seg.name();
    EXPECT_TRUE(torch::allclose(seg.master.grad(), want[seg.param].narrow(0, seg.offset, seg.master.numel()), 1e-6, 1e-6))
        << seg.name();
  }
  // Whole weights back from the shards; an "update" of the masters reaches the next forward.
  for (const auto& [name, w] : s.full_parameters(/*everywhere=*/true)) {
    for (const auto& u : reference) {
      for (const auto& [n, p] : u.params) {
        if (n == name) {
          EXPECT_TRUE(torch::equal(w, p.detach())) << name;
        }
      }
    }
  }
  for (const auto& seg : s.segments()) seg.master.detach().fill_(1.0);
  s.after_step();
  s.before_forward(1);
  EXPECT_TRUE(torch::equal(units[1].params[0].second.detach(), torch::ones({5, 5})));
  s.after_step();  // frees them again

  // Optimizer state: cut to segments, gathered on rank 0 and rebuilt whole.
  NamedTensors whole;
  for (const auto& u : reference) {
    for (const auto& [name, p] : u.params) {
      whole.emplace_back("exp_avg." + name, torch::arange(p.numel(), torch::kFloat).view(p.sizes()));
      whole.emplace_back("exp_avg_sq." + name, torch::full(p.sizes(), 2.0f));
      whole.emplace_back("step." + name, torch::full({}, 4.0f));
    }
  }
  NamedTensors back = gather_optimizer_state(s.shard_state(whole), *group);
  if (rank == 0) {
    back = s.unshard_state(back);
    std::map<std::string, torch::Tensor> by_name(back.begin(), back.end());
    ASSERT_EQ(back.size(), whole.size());
    for (const auto& [name, t] : whole) EXPECT_TRUE(torch::equal(by_name[name], t)) << name;
  }
  // A moment of another size than its weight (a damaged checkpoint) is named, not sliced.
  NamedTensors longer = whole;
  longer[0].second = torch::zeros({longer[0].second.numel() + 1});
  try {
    s.shard_state(longer);
    ADD_FAILURE() << "expected an IoError";
  } catch (const IoError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("optimizer state '" + whole[0].first + "' has"), std::string::npos) << message;
  }
  group->shutdown();
}

TEST(DistWorker, ShardedZero2) {
  HWT_WORKER_ONLY();
  auto group = testing::worker_group();
  std::vector<ShardedUnitParams> units = make_units();
  ShardingOptions o;
  o.stage = ShardStage::Zero2;
  ShardedParameters s(group, units, o);
  EXPECT_EQ(s.gathered_bytes(), (22 + 30 + 30) * 4);  // whole (each unit padded to a multiple of 2)
  s.begin_micro_step(true);
  forward(s, units, torch::full({4, 5}, 0.3)).backward();
  s.finish();
  for (const auto& u : units) {
    for (const auto& [name, p] : u.params) EXPECT_FALSE(p.grad().defined()) << name << ": freed once reduced";
  }
  for (const auto& seg : s.segments()) seg.master.detach().add_(group->rank() + 1.0);
  s.after_step();  // each rank's masters reach every rank
  for (const auto& [name, w] : s.full_parameters(/*everywhere=*/true)) {
    for (const auto& u : units) {
      for (const auto& [n, p] : u.params) {
        if (n == name) {
          EXPECT_TRUE(torch::equal(w, p.detach())) << name;
        }
      }
    }
  }
  group->shutdown();
}

// Live CPU tensor bytes once they stop changing: Gloo's worker thread drops its own reference to a
// work (and so its tensors) just after completing it, so a count read right after a wait can be high.
int64_t settled_host_bytes() {
  int64_t last = host_allocation().current_bytes;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int64_t now = host_allocation().current_bytes;
    if (now == last) return now;
    last = now;
  }
  return last;
}

// After finish() a rank holds its gradient shards and nothing else of the step: every whole-unit
// reduce buffer is freed once its reduce-scatter is folded (a Gloo work kept until after_step
// would keep its input, the whole unit's gradient, alive through the rest of backward).
TEST(DistWorker, ShardedReduceBuffersFreed) {
  HWT_WORKER_ONLY();
  ASSERT_TRUE(install_host_allocation_counter());
  auto group = testing::worker_group();
  for (const ShardStage stage : {ShardStage::Zero3, ShardStage::Zero2}) {
    std::vector<ShardedUnitParams> units = make_units(256);
    ShardingOptions o;
    o.stage = stage;
    ShardedParameters s(group, units, o);
    const torch::Tensor x = torch::full({4, 256}, 0.01);
    s.begin_micro_step(true);
    const int64_t before = settled_host_bytes();
    forward(s, units, x).backward();
    s.finish();
    int64_t shards = 0;
    for (const auto& seg : s.segments()) shards += seg.master.numel() * 4;
    const int64_t held = settled_host_bytes() - before;
    EXPECT_GE(held, shards) << shard_stage_name(stage);
    EXPECT_LE(held, shards + 4096) << shard_stage_name(stage) << ": " << held - shards
                                   << " bytes beyond the gradient shards (a unit's whole gradient is 263,168)";
  }
  group->shutdown();
}

TEST(ShardedParameters, ReduceBuffersAreFreedOnceFolded) {
  auto run = testing::run_workers("ShardedReduceBuffersFreed", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

TEST(ShardedParameters, Zero3GathersOnlyWhatRunsAndAveragesGradients) {
  auto run = testing::run_workers("ShardedZero3", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

TEST(ShardedParameters, Zero2KeepsParametersWholeAndRefreshesThem) {
  auto run = testing::run_workers("ShardedZero2", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

}  // namespace
}  // namespace hwt
