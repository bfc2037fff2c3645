// ZeRO-1: the ownership covers every parameter exactly once and balances elements; after a step,
// sync_parameters_after_step gives every rank the owners' values, holding at most two buckets at
// once; rank 0 gathers the state shards.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "dist/dist_test_util.h"
#include "hwtrain/dist/zero1.h"
#include "hwtrain/obs/host_allocation_counter.h"

namespace hwt {
namespace {

NamedTensors named_params() {
  NamedTensors p;
  const std::vector<std::vector<int64_t>> shapes = {{100, 10}, {10}, {300}, {7, 7}, {1}, {64, 8}, {3}};
  for (size_t i = 0; i < shapes.size(); ++i) p.emplace_back("layer" + std::to_string(i), torch::zeros(shapes[i]));
  return p;
}

TEST(Zero1, OwnershipCoversEveryParameterOnceAndBalances) {
  const NamedTensors params = named_params();
  int64_t total = 0;
  for (const auto& [n, t] : params) total += t.numel();
  for (int world : {1, 2, 3, 4}) {
    Zero1Ownership o = assign_zero1_owners(params, world);
    std::multiset<std::string> seen;
    for (int r = 0; r < world; ++r) {
      for (const auto& name : owned_parameter_names(params, r, world)) seen.insert(name);
    }
    EXPECT_EQ(seen.size(), params.size()) << world << " ranks";
    for (const auto& [name, t] : params) EXPECT_EQ(seen.count(name), 1u) << name;
    int64_t largest = 0, sum = 0;
    for (int64_t n : o.numel_per_rank) {
      largest = std::max(largest, n);
      sum += n;
    }
    EXPECT_EQ(sum, total);
    // Greedy by size: no rank exceeds the fair share by more than the largest parameter.
    EXPECT_LE(largest, total / world + 1000) << world << " ranks";
  }
  Zero1Ownership two = assign_zero1_owners(params, 2);
  EXPECT_EQ(two.owner_of("layer0"), 0);  // the largest goes first, to rank 0
  EXPECT_EQ(two.owner_of("nope"), -1);
  EXPECT_NE(describe_zero1_memory(two).find("rank 1"), std::string::npos);
}

TEST(DistWorker, Zero1Sync) {
  HWT_WORKER_ONLY();
  ASSERT_TRUE(install_host_allocation_counter());
  DistConfig config;
  config.timeout = 30;
  ProcessGroup group(read_dist_env(), config);
  const int rank = group.rank();
  NamedTensors params = named_params();
  Zero1Ownership o = assign_zero1_owners(params, group.world_size());
  // The "optimizer step": owners write their update, the others hold stale values.
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].second.fill_(o.owner[i] == rank ? 10.0 * static_cast<double>(i + 1) + o.owner[i] : -1.0);
  }
  // Buckets of 1 KiB: the 4,000- and 2,048-byte parameters go alone and in place, the small ones
  // packed; at most two buckets are allocated at once (every owned and received parameter before).
  const int64_t bucket = 1024, before = host_allocation().current_bytes;
  reset_host_allocation_peak();
  sync_parameters_after_step(params, o, group, bucket);
  EXPECT_LE(host_allocation().peak_bytes - before, 2 * bucket);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::equal(params[i].second, torch::full_like(params[i].second, 10.0 * (i + 1) + o.owner[i])))
        << params[i].first;
  }
  for (auto& [name, p] : params) p.fill_(o.owner_of(name) == rank ? 3.0 : -1.0);
  sync_parameters_after_step(params, o, group);  // the default buckets: one per owner here
  for (const auto& [name, p] : params) EXPECT_TRUE(torch::equal(p, torch::full_like(p, 3.0))) << name;

  // Several packed buckets per owner (twelve 400-byte parameters), a bf16 one, a transposed one
  // (packed, not in place): still at most two buckets at once, and every value the owner's.
  NamedTensors mixed;
  for (int i = 0; i < 12; ++i) mixed.emplace_back("small" + std::to_string(i), torch::zeros({100}));
  mixed.emplace_back("half", torch::zeros({300}, torch::kBFloat16));
  mixed.emplace_back("transposed", torch::zeros({10, 20}).t());
  const Zero1Ownership mo = assign_zero1_owners(mixed, group.world_size());
  for (size_t i = 0; i < mixed.size(); ++i) {
    mixed[i].second.fill_(mo.owner[i] == rank ? 5.0 + static_cast<double>(i) : -1.0);
  }
  const int64_t start = host_allocation().current_bytes;
  reset_host_allocation_peak();
  sync_parameters_after_step(mixed, mo, group, bucket);
  EXPECT_LE(host_allocation().peak_bytes - start, 2 * bucket);
  for (size_t i = 0; i < mixed.size(); ++i) {
    const torch::Tensor& t = mixed[i].second;
    EXPECT_TRUE(torch::equal(t, torch::full_like(t, 5.0 + static_cast<double>(i)))) << mixed[i].first;
  }
  NamedTensors shard;
  for (const auto& name : o.owned_by(rank)) {
    shard.emplace_back("exp_avg." + name, torch::full({2, 3}, rank + 0.5));
    shard.emplace_back("step." + name, torch::full({}, 7.0f));
  }
  NamedTensors all = gather_optimizer_state(shard, group);
  if (rank == 0) {
    std::map<std::string, torch::Tensor> by_name(all.begin(), all.end());
    EXPECT_EQ(all.size(), 2 * params.size());
    EXPECT_EQ(by_name.size(), all.size());
    for (const auto& [name, t] : params) {
      ASSERT_TRUE(by_name.count("exp_avg." + name)) << name;
      EXPECT_TRUE(torch::equal(by_name["exp_avg." + name], torch::full({2, 3}, o.owner_of(name) + 0.5))) << name;
      EXPECT_EQ(by_name["step." + name].item<float>(), 7.0f);
    }
  } else {
    EXPECT_TRUE(all.empty());
  }
}

TEST(Zero1, SyncMakesAllRanksEqualAndRank0GathersTheState) {
  auto run = testing::run_workers("Zero1Sync", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

}  // namespace
}  // namespace hwt
