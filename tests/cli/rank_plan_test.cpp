// Issue 19, defect 6: ranks probing the hardware each for themselves planned differently (one chose
// fp32, and MFU printed 1297%). Now rank 0 alone probes, every rank plans from its profile, and the
// plan joins the start-up consistency check. Here rank 1 runs pinned to one core (taskset), so its
// own probe would see another machine (1 core instead of 2, another GEMM rate, hence another MFU
// peak in plan.json): the run trains only because rank 1 takes rank 0's profile; had it planned
// from its own, the consistency check would stop it naming the plan. Started as torchrun starts
// ranks (the environment, no launcher), and both ranks exit 0.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <thread>

#include "dist/dist_test_util.h"
#include "support/run_metrics.h"
#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace rank_plan {

TEST(RankPlans, APinnedRankTrainsWithRankZerosPlan) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: pinning rank 1 changes nothing it sees";
  if (testing::run_shell("taskset -c 0 true > /dev/null 2>&1") != 0) GTEST_SKIP() << "no taskset";
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string args =
      "train --data corpus --set data.document_separator=% --set data.cache_dir=cache --set model.preset=tiny "
      "--set train.max_steps=3 --set train.eval_interval=0 --set train.sample_tokens=0 --set train.log_interval=1 "
      "--set train.time_budget=0 --set log.report=false --set checkpoint.save_final=false --set dist.timeout=60 "
      "--set train.device=cpu --out run";
  dir.write("ranks.sh", "export MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(testing::free_port()) +
                            " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2\n"
                            "RANK=0 LOCAL_RANK=0 " + std::string(HWTRAIN_BINARY) + " " + args + " > r0.log 2>&1 & P0=$!\n"
                            "RANK=1 LOCAL_RANK=1 taskset -c 0 " + std::string(HWTRAIN_BINARY) + " " + args +
                            " > r1.log 2>&1 & P1=$!\n"
                            "wait $P0; r0=$?; wait $P1; echo $r0 $? > result\n");
  ASSERT_EQ(testing::run_shell("cd '" + dir.path().string() + "' && timeout 300 bash ranks.sh"), 0);
  std::ifstream in(dir / "result");
  int rc0 = -1, rc1 = -1;
  ASSERT_TRUE(in >> rc0 >> rc1);
  const std::string log0 = testing::read_text(dir / "r0.log"), log1 = testing::read_text(dir / "r1.log");
  EXPECT_EQ(rc0, 0) << log0 << "\n--- rank 1:\n" << log1;
  EXPECT_EQ(rc1, 0) << log1;
  EXPECT_EQ(testing::step_losses(dir / "run" / "metrics.jsonl").size(), 3u);
  // The plan rank 0 wrote: its probe's peak, and an MFU that is a fraction even when ctest runs other
  // tests beside this one (a contended probe gives way to the ISA peak: MathLibInfo::gemm_contended).
  const auto plan = nlohmann::json::parse(testing::read_text(dir / "run" / "plan.json"));
  EXPECT_GT(plan.value("peak_flops", 0.0), 0.0);
  std::ifstream metrics(dir / "run" / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("mfu") && j["mfu"].is_number()) {
      EXPECT_LT(j["mfu"].get<double>(), 1.0) << line;
    }
  }
}

}  // namespace rank_plan
}  // namespace hwt
