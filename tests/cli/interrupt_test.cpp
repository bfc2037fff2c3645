// A run a signal cuts short writes its final checkpoint and then exits 128 + the signal (130 for
// Ctrl-C, 143 for SIGTERM), so that a script, Slurm or a sweep does not take it for a finished run;
// under `hwtrain launch` the ranks that stop so are not failures: none is blamed or killed, and the
// launcher exits with the same status; a rank stopped only by another's signal exits with it too.
#include <gtest/gtest.h>

#include "cli/model_parallel_args.h"
#include "dist/dist_test_util.h"
#include "hwtrain/io/checkpoint_store.h"
#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

// Waits (up to 120 s) until run/metrics.jsonl holds a step.
const char* const kWaitForAStep =
    "for i in $(seq 1200); do\n"
    "  grep -q '\"step\"' run/metrics.jsonl 2>/dev/null && break; sleep 0.1\n"
    "done\n";

// Starts `command` (hwtrain ...) in the background, signals it with `sig` once run/metrics.jsonl
// holds a step, and returns its exit status (-1 if no step came within 120 s).
int interrupted_status(const testing::TempDir& dir, const std::string& command, const std::string& sig,
                       const std::string& log) {
  // set -m: a background job of a script ignores SIGINT otherwise.
  dir.write("stop.sh", "set -m\n" + std::string(HWTRAIN_BINARY) + " " + command + " > " + log + " 2>&1 & P=$!\n" +
                       kWaitForAStep +
                       "grep -q '\"step\"' run/metrics.jsonl || { kill -9 $P; exit 255; }\n"
                       "kill -" + sig + " $P; wait $P; exit $?\n");
  const int status = testing::run_shell("cd '" + dir.path().string() + "' && timeout 300 bash stop.sh");
  return status == 255 ? -1 : status;
}

TEST(Interrupt, ACutShortRunSavesThenExitsWithTheSignalsStatus) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string train = "train " + testing::kModelParallelRun +
                            "--set model.preset=tiny --set train.max_steps=100000 --set log.flush_seconds=0.1 "
                            "--out run";
  EXPECT_EQ(interrupted_status(dir, train, "TERM", "one.log"), 128 + 15) << testing::read_text(dir / "one.log");
  const std::string one = testing::read_text(dir / "one.log");
  EXPECT_NE(one.find("interrupted by SIGTERM at step "), std::string::npos) << one;
  EXPECT_NE(one.find(" of 100000: exit status 143"), std::string::npos) << one;
  EXPECT_TRUE(CheckpointStore(dir / "run" / "checkpoints", 1).latest()) << one;

  fs::remove_all(dir / "run");
  EXPECT_EQ(interrupted_status(dir, "launch --nproc-per-node 2 --master-port 29713 -- " + train, "INT", "two.log"),
            128 + 2) << testing::read_text(dir / "two.log");
  const std::string two = testing::read_text(dir / "two.log");
  EXPECT_NE(two.find("hwtrain launch: interrupted by SIGINT, forwarded to every rank; the ranks stopped with it "
                     "(exit status 130)"), std::string::npos) << two;
  EXPECT_EQ(two.find("the other ranks were stopped"), std::string::npos) << two;
  EXPECT_TRUE(CheckpointStore(dir / "run" / "checkpoints", 1).latest()) << two;

  // Two ranks started as torchrun starts them, SIGTERM to rank 1 alone: rank 0, stopped by the
  // agreement, exits with the same status.
  fs::remove_all(dir / "run");
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(testing::free_port()) +
                          " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 ";
  const std::string bin = std::string(HWTRAIN_BINARY) + " " + train;
  dir.write("ranks.sh", "set -m\n" + env + "RANK=0 LOCAL_RANK=0 " + bin + " > r0.log 2>&1 & P0=$!\n" + env +
                            "RANK=1 LOCAL_RANK=1 " + bin + " > r1.log 2>&1 & P1=$!\n" + kWaitForAStep +
                            "kill -TERM $P1; wait $P0; r0=$?; wait $P1; echo $r0 $? > result\n");
  ASSERT_EQ(testing::run_shell("cd '" + dir.path().string() + "' && timeout 300 bash ranks.sh"), 0);
  EXPECT_EQ(testing::read_text(dir / "result"), "143 143\n") << testing::read_text(dir / "r0.log");
}

}  // namespace
}  // namespace hwt
