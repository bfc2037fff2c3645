// The distributed fault suite (issue 19): each rank of a 2-rank `hwtrain launch` run killed
// (SIGKILL) or frozen (SIGSTOP) at start-up, as a step begins, in the middle of a collective and
// in the middle of a checkpoint write (rank 0 writes them; under ZeRO-2 rank 1 writes its shard of
// them), injected with HWTRAIN_FAULT
// (core/fault_injection.h). Every run must end non-zero within dist.timeout + the liveness margin
// + the grace period + start-up, name the rank at fault, print no C++ stack frames, leave no
// process behind, and, after a fault during a checkpoint, resume from the newest complete one.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "dist/dist_test_util.h"
#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

struct Fault {
  std::string point;
  int rank;
  std::string signal;
  int nth;
};

// How ctest lists a scenario (instead of the parameter's bytes).
void PrintTo(const Fault& f, std::ostream* os) { *os << f.signal << " rank " << f.rank << " at " << f.point << " #" << f.nth; }

std::string name_of(const ::testing::TestParamInfo<Fault>& info) {
  return info.param.signal + "_rank" + std::to_string(info.param.rank) + "_" + info.param.point;
}

constexpr double kTimeout = 6, kMargin = 5, kGrace = 3;

struct DistFaults : ::testing::TestWithParam<Fault> {};

TEST_P(DistFaults, EndWithinTheBoundNamingTheRank) {
  const Fault f = GetParam();
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string train =
      "train --data '" + (dir / "corpus").string() + "' --set data.document_separator=% --set data.cache_dir=cache "
      "--set model.preset=tiny --set train.eval_interval=0 --set train.sample_tokens=0 --set train.log_interval=1 "
      "--set log.progress=lines --set train.time_budget=0 --set log.report=false --set log.tensorboard=false "
      "--set optimization.intra_op_threads=1 --set optimization.mixed_precision_dtype=fp32 "
      "--set checkpoint.interval=10 --set checkpoint.save_final=false --set train.device=cpu --out run" +
      std::string(f.point == "shard" ? " --set dist.sharding=zero2" : "");  // every rank writes a shard
  const std::string launch = "HWTRAIN_FAULT=" + f.point + ":" + std::to_string(f.rank) + ":" + f.signal + ":" +
                             std::to_string(f.nth) + " " + HWTRAIN_BINARY + " launch --nproc-per-node 2 --master-port " +
                             std::to_string(testing::free_port()) + " --grace " + std::to_string(kGrace) + " -- " +
                             train + " --set train.max_steps=60 --set dist.timeout=" + std::to_string(kTimeout);
  const auto start = std::chrono::steady_clock::now();
  const int rc = testing::run_shell("cd '" + dir.path().string() + "' && " + launch + " > out.log 2>&1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string log = testing::read_text(dir / "out.log");

  EXPECT_NE(rc, 0) << log;
  EXPECT_LT(seconds, kTimeout + kMargin + kGrace + 25) << log;
  const std::string r = "rank " + std::to_string(f.rank);
  const bool named = log.find(r + " was killed") != std::string::npos ||
                     log.find(r + " stopped responding") != std::string::npos ||
                     (f.rank == 0 && log.find("rank 0 is gone or frozen") != std::string::npos) ||
                     log.find(r + " (pid ") != std::string::npos;
  EXPECT_TRUE(named) << "the output does not name " << r << ":\n" << log;
  EXPECT_EQ(log.find("frame #"), std::string::npos) << log;
  EXPECT_EQ(log.find("c10::Error"), std::string::npos) << log;
  EXPECT_EQ(log.find("] [rank "), std::string::npos) << log;
  // No rank outlives the launcher (their command lines hold this test's directory; "[-]" keeps
  // pgrep from matching its own shell).
  EXPECT_NE(testing::run_shell("pgrep -f '[-]-data " + (dir / "corpus").string() + "' > /dev/null"), 0)
      << "a rank is still running";

  if (f.point == "checkpoint" || f.point == "shard") {
    // The second checkpoint was being written: the first is the newest complete one.
    ASSERT_TRUE(std::filesystem::exists(dir / "run/checkpoints/step_00000010")) << log;
    const int resumed = testing::run_shell("cd '" + dir.path().string() + "' && " + HWTRAIN_BINARY + " " + train +
                                  " --set train.max_steps=12 --resume run > resume.log 2>&1");
    EXPECT_EQ(resumed, 0) << testing::read_text(dir / "resume.log");
    EXPECT_NE(testing::read_text(dir / "resume.log").find("step 11 |"), std::string::npos) << testing::read_text(dir / "resume.log");
  }
}

std::vector<Fault> faults() {
  std::vector<Fault> all;
  for (const char* sig : {"KILL", "STOP"}) {
    for (int rank : {0, 1}) {
      all.push_back({"startup", rank, sig, 1});
      all.push_back({"step", rank, sig, 15});
      all.push_back({"collective", rank, sig, 40});
    }
    all.push_back({"checkpoint", 0, sig, 2});  // rank 0 writes the checkpoint
    all.push_back({"shard", 1, sig, 2});       // ZeRO-2: rank 1 writes its shard of it
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Launch, DistFaults, ::testing::ValuesIn(faults()), name_of);

}  // namespace
}  // namespace hwt
