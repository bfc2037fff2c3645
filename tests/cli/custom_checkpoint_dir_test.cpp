// A run whose checkpoint.dir lies outside its run directory (a scratch file system): resuming from
// one of its checkpoints continues that run's directory (metrics, config) rather than writing the
// run's files among the checkpoints; naming the run directory finds its newest checkpoint there,
// for train --resume as for eval. A copied checkpoint cannot send a run's outputs to the run it names.
#include <gtest/gtest.h>

#include "hwtrain/core/files.h"
#include "support/run_metrics.h"
#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

const std::string kTrain =
    "train --data corpus --set data.document_separator=% --set data.cache_dir=cache --set model.preset=tiny "
    "--set train.device=cpu --set train.eval_interval=0 --set train.micro_batch_size=2 --set log.tensorboard=false "
    "--set log.report=false --set train.sample_tokens=0 --set train.time_budget=0 --set train.log_interval=1 "
    "--set optimization.intra_op_threads=1 --set optimization.mixed_precision_dtype=fp32 --set checkpoint.interval=2 ";

TEST(CustomCheckpointDir, ResumeContinuesTheRunThatWroteTheCheckpoint) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const fs::path scratch = dir / "scratch" / "ckpts";
  const std::string at_scratch = "--set checkpoint.dir=" + scratch.string() + " ";
  ASSERT_EQ(testing::hwtrain_in(dir.path(), kTrain + at_scratch + "--set train.max_steps=4 --out run", "a.log"), 0)
      << testing::read_text(dir / "a.log");
  ASSERT_TRUE(fs::exists(scratch / "step_00000004"));
  EXPECT_FALSE(fs::exists(dir / "run" / "checkpoints"));

  // From a checkpoint, no --out: the run that wrote it goes on.
  ASSERT_EQ(testing::hwtrain_in(dir.path(), kTrain + "--resume " + (scratch / "step_00000002").string() +
                                                " --set train.max_steps=6", "b.log"),
            0)
      << testing::read_text(dir / "b.log");
  EXPECT_NE(testing::read_text(dir / "b.log").find("run directory " + (dir / "run").string()), std::string::npos)
      << testing::read_text(dir / "b.log");
  EXPECT_FALSE(fs::exists(scratch / "metrics.jsonl"));
  EXPECT_TRUE(fs::exists(scratch / "step_00000006"));
  EXPECT_EQ(testing::step_losses(dir / "run" / "metrics.jsonl").size(), 4u + 4u);  // steps 1-4, then 3-6

  // The run directory names its newest checkpoint, in checkpoint.dir.
  ASSERT_EQ(testing::hwtrain_in(dir.path(), kTrain + "--resume run --set train.max_steps=8", "c.log"), 0)
      << testing::read_text(dir / "c.log");
  EXPECT_NE(testing::read_text(dir / "c.log").find("step 7 |"), std::string::npos) << testing::read_text(dir / "c.log");
  EXPECT_TRUE(fs::exists(scratch / "step_00000008"));
  ASSERT_EQ(testing::hwtrain_in(dir.path(), "eval run --batches 1", "eval.log"), 0)
      << testing::read_text(dir / "eval.log");
  EXPECT_NE(testing::read_text(dir / "eval.log").find("step_00000008"), std::string::npos)
      << testing::read_text(dir / "eval.log");

  // A copy elsewhere names run/ too, but run/'s config keeps its checkpoints in scratch/: the copy's
  // own directory is its run, as before.
  fs::create_directories(dir / "copy");
  fs::copy(scratch / "step_00000008", dir / "copy" / "step_00000008", fs::copy_options::recursive);
  ASSERT_EQ(testing::hwtrain_in(dir.path(), kTrain + "--resume copy/step_00000008 --set train.max_steps=9", "d.log"),
            0)
      << testing::read_text(dir / "d.log");
  EXPECT_NE(testing::read_text(dir / "d.log").find("run directory " + (dir / "copy").string()), std::string::npos)
      << testing::read_text(dir / "d.log");
  EXPECT_EQ(testing::step_losses(dir / "run" / "metrics.jsonl").size(), 10u);  // untouched by the copy's run
  EXPECT_FALSE(fs::exists(scratch / "step_00000009"));  // the copy's checkpoints stay with the copy
  EXPECT_TRUE(fs::exists(dir / "copy" / "checkpoints" / "step_00000009"));

  // A checkpoint that lost its COMPLETE marker is refused as such, not read as a run directory
  // whose newest checkpoint is another one.
  fs::remove(dir / "copy" / "step_00000008" / "COMPLETE");
  EXPECT_NE(testing::hwtrain_in(dir.path(), "eval copy/step_00000008 --batches 1", "incomplete.log"), 0);
  EXPECT_NE(testing::read_text(dir / "incomplete.log").find("COMPLETE"), std::string::npos)
      << testing::read_text(dir / "incomplete.log");

  // The checkpoints moved home from the scratch space: the run directory finds them in checkpoints/.
  fs::rename(scratch, dir / "run" / "checkpoints");
  ASSERT_EQ(testing::hwtrain_in(dir.path(), "eval run --batches 1", "home.log"), 0)
      << testing::read_text(dir / "home.log");
}

// A checkpoint.dir of the natural shape <scratch>/<run>/checkpoints: the checkpoint's own run is
// continued, not <scratch>/<run>.
TEST(CustomCheckpointDir, ADirectoryNamedCheckpointsStillContinuesTheRun) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const fs::path scratch = dir / "scratch" / "run" / "checkpoints";
  ASSERT_EQ(testing::hwtrain_in(dir.path(), kTrain + "--set checkpoint.dir=" + scratch.string() +
                                                " --set train.max_steps=2 --out run", "a.log"),
            0)
      << testing::read_text(dir / "a.log");
  ASSERT_EQ(testing::hwtrain_in(dir.path(), kTrain + "--resume " + (scratch / "step_00000002").string() +
                                                " --set train.max_steps=3", "b.log"),
            0)
      << testing::read_text(dir / "b.log");
  EXPECT_NE(testing::read_text(dir / "b.log").find("run directory " + (dir / "run").string()), std::string::npos)
      << testing::read_text(dir / "b.log");
  EXPECT_FALSE(fs::exists(dir / "scratch" / "run" / "metrics.jsonl"));
}

}  // namespace
}  // namespace hwt
