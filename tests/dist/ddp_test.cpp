// DataParallel over real ranks (this binary started twice by the launcher, Gloo on loopback):
// bucketed all-reduce equals the locally computed average, and 2 ranks x batch B give the same
// gradients as 1 process x batch 2B, with gradient accumulation, over several optimizer steps.
#include <gtest/gtest.h>

#include "dist/dist_test_util.h"
#include "hwtrain/dist/ddp.h"

namespace hwt {
namespace {

using testing::run_workers;

std::shared_ptr<ProcessGroup> worker_group(double timeout = 30) {
  DistConfig config;
  config.timeout = timeout;
  return std::make_shared<ProcessGroup>(read_dist_env(), config);
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// ---- bucketed all-reduce ---------------------------------------------------------------------

const std::vector<std::vector<int64_t>> kShapes = {{7}, {3, 5}, {64, 33}, {2, 2, 2}, {1000}};

// The gradient rank `r` produces for parameter `i`; the last parameter is unused on rank 1.
torch::Tensor synthetic_grad(int r, size_t i) {
  if (r == 1 && i == kShapes.size() - 1) return torch::zeros(kShapes[i]);
  torch::manual_seed(100 + 10 * r + static_cast<int>(i));
  return torch::randn(kShapes[i]);
}

TEST(DistWorker, BucketedAllReduce) {
  HWT_WORKER_ONLY();
  auto group = worker_group();
  const int rank = group->rank(), world = group->world_size();
  for (double bucket_mb : {1e-6, 0.01, 25.0}) {
    std::vector<torch::Tensor> params;
    for (const auto& s : kShapes) params.push_back(torch::zeros(s, torch::requires_grad()));
    DataParallelOptions options;
    options.bucket_size_mb = options.first_bucket_size_mb = bucket_mb;
    DataParallel ddp(group, params, options);
    const size_t expected_buckets = bucket_mb == 1e-6 ? kShapes.size() : bucket_mb == 25.0 ? 1 : 0;
    if (expected_buckets > 0) {
      EXPECT_EQ(ddp.bucket_layout().size(), expected_buckets);
    }
    // Reverse registration order: the last parameter's gradient is ready first.
    EXPECT_EQ(ddp.bucket_layout().front().front(), kShapes.size() - 1);

    ddp.begin_micro_step(true);
    EXPECT_FALSE(ddp.collective_started());
    torch::Tensor loss = torch::zeros({});
    for (size_t i = 0; i < params.size(); ++i) {
      if (rank == 1 && i == params.size() - 1) continue;  // no gradient at all on this rank
      loss = loss + (params[i] * synthetic_grad(rank, i)).sum();
    }
    loss.backward();
    // One bucket per parameter: rank 0 launched them in backward; rank 1's first bucket (the unused
    // parameter) never became ready, so it launched nothing before finish() (buckets go in order).
    if (bucket_mb == 1e-6) {
      EXPECT_EQ(ddp.collective_started(), rank == 0) << "rank " << rank;
    }
    ddp.finish();
    EXPECT_FALSE(ddp.collective_started());
    for (size_t i = 0; i < params.size(); ++i) {
      torch::Tensor expected = torch::zeros(kShapes[i]);
      for (int r = 0; r < world; ++r) expected += synthetic_grad(r, i);
      expected /= world;
      ASSERT_TRUE(params[i].grad().defined()) << "parameter " << i;
      EXPECT_LT(max_abs_diff(params[i].grad(), expected), 1e-6) << "parameter " << i << ", bucket " << bucket_mb << " MB";
    }
    EXPECT_EQ(ddp.last_stats().buckets, static_cast<int64_t>(ddp.bucket_layout().size()));
    EXPECT_EQ(ddp.last_stats().syncs, 1);
  }
}

TEST(DataParallel, BucketedAllReduceEqualsLocalAverage) {
  auto run = run_workers("BucketedAllReduce", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

// ---- 2 ranks x B == 1 process x 2B -----------------------------------------------------------

torch::nn::Sequential tiny_model(int seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::Tanh(),
                               torch::nn::LayerNorm(torch::nn::LayerNormOptions({16})), torch::nn::Linear(16, 4));
}

TEST(DistWorker, MatchesSingleProcess) {
  HWT_WORKER_ONLY();
  auto group = worker_group();
  const int rank = group->rank(), world = group->world_size();
  auto model = tiny_model(1 + rank);  // different weights per rank: the broadcast must fix that
  auto reference = tiny_model(1);     // rank 0's weights, trained on the whole batch in one process
  DataParallelOptions options;
  options.bucket_size_mb = options.first_bucket_size_mb = 0.0001;  // three buckets
  DataParallel ddp(group, model->parameters(), options);
  EXPECT_GT(ddp.bucket_layout().size(), 2u);
  auto params = model->parameters(), ref_params = reference->parameters();
  for (size_t i = 0; i < params.size(); ++i) ASSERT_TRUE(torch::equal(params[i], ref_params[i])) << "parameter " << i;

  torch::optim::SGD opt(model->parameters(), 0.1), ref_opt(reference->parameters(), 0.1);
  const int64_t B = 3, accum = 2, per_rank = B * accum;
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(1000 + step);  // every rank draws the same global batch
    auto x_N8 = torch::randn({world * per_rank, 8});
    auto y_N4 = torch::randn({world * per_rank, 4});
    ref_opt.zero_grad();
    torch::mse_loss(reference->forward(x_N8), y_N4).backward();

    opt.zero_grad();
    auto x_mine = x_N8.narrow(0, rank * per_rank, per_rank), y_mine = y_N4.narrow(0, rank * per_rank, per_rank);
    for (int64_t k = 0; k < accum; ++k) {
      ddp.begin_micro_step(k == accum - 1);
      auto loss = torch::mse_loss(model->forward(x_mine.narrow(0, k * B, B)), y_mine.narrow(0, k * B, B));
      (loss / static_cast<double>(accum)).backward();
    }
    ddp.finish();
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_LT(max_abs_diff(params[i].grad(), ref_params[i].grad()), 1e-6) << "step " << step << " parameter " << i;
    }
    opt.step();
    ref_opt.step();
  }
  EXPECT_EQ(ddp.total_stats().syncs, 3);
}

TEST(DataParallel, TwoRanksMatchOneProcessWithDoubleBatch) {
  auto run = run_workers("MatchesSingleProcess", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

}  // namespace
}  // namespace hwt
