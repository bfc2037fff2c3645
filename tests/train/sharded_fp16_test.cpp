// fp16 under ZeRO-2/3: each rank unscales only its gradient shard, so an inf/NaN on one rank must
// make every rank skip the update. update_after_backward with UpdateRule::sum_across_ranks (what
// train/sharded_training.cpp wires to the engine's all-reduce) on 2 Gloo ranks, one of which holds
// an inf: both skip; without the agreement the clean rank would have stepped alone. (On CPU the
// planner runs fp16 requests in bf16, so this path is exercised here rather than end to end.)
#include <gtest/gtest.h>

#include "dist/dist_test_util.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/train/grad_scaler.h"
#include "hwtrain/train/update_step.h"

namespace hwt {
namespace {

TEST(DistWorker, ShardedFp16Verdict) {
  HWT_WORKER_ONLY();
  auto shared = testing::worker_group();
  ProcessGroup& group = *shared;
  const bool poisoned = group.rank() == 0;
  for (const bool agree : {false, true}) {
    GradScalerOptions o;  // enabled: fp16
    GradScaler scaler(o, torch::kCPU);
    torch::Tensor shard = torch::zeros({4});
    shard.mutable_grad() = torch::full({4}, poisoned ? INFINITY : 1.0f);
    UpdateRule rule;
    rule.low_precision = true;
    if (agree) {
      rule.sum_across_ranks = [&](torch::Tensor& t) { group.wait(group.all_reduce_sum(t), "verdict"); };
    }
    bool stepped = false;
    const UpdateOutcome out = update_after_backward({shard}, scaler, 1.0, rule, [&] { stepped = true; }, [] {});
    EXPECT_EQ(stepped, !agree && !poisoned) << "agree " << agree;
    EXPECT_EQ(out.updated, stepped);
    EXPECT_EQ(scaler.skipped_steps(), stepped ? 0 : 1);
  }
  group.shutdown();
}

TEST(ShardedFp16, AnInfOnOneRankSkipsTheStepOnAll) {
  auto run = testing::run_workers("ShardedFp16Verdict", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

}  // namespace
}  // namespace hwt
