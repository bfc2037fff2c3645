// A disk that fills up during a checkpoint save (issue 19's fault suite), on a real file system: the
// run directory on a 2.6 MB tmpfs mounted in a user namespace (unshare -rm; the test skips where
// the kernel or container allows none), where the tiny model's first checkpoint (1.5 MB) fits and
// the second does not. The run must stop non-zero with one line naming the file it could not
// write and the reason, leave no staging directory behind, and keep the first checkpoint whole:
// eval (which verifies every checksum) reads it.
#include <gtest/gtest.h>

#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace full_disk {

TEST(FullDisk, ACheckpointThatDoesNotFitNamesThePathAndKeepsThePreviousOne) {
  if (testing::run_shell("unshare -rm true > /dev/null 2>&1") != 0) GTEST_SKIP() << "no user namespace (unshare -rm)";
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string bin = HWTRAIN_BINARY;
  const std::string data = " --data corpus --set data.document_separator=% --set data.cache_dir=cache ";
  dir.write("full.sh",
            "mkdir -p disk\n"
            "mount -t tmpfs -o size=2600k tmpfs disk || exit 77\n" +
                bin + " train" + data +
                "--set model.preset=tiny --set train.max_steps=6 --set train.eval_interval=0 "
                "--set train.sample_tokens=0 --set log.report=false --set log.tensorboard=false "
                "--set checkpoint.interval=2 --set checkpoint.save_final=false --set train.device=cpu "
                "--out disk/run > train.log 2>&1\n"
                "echo $? > train.rc\n"
                "ls -a disk/run/checkpoints > checkpoints.txt\n" +
                bin + " eval disk/run" + data + "> eval.log 2>&1\n"
                "echo $? > eval.rc\n");
  const int rc = testing::run_shell("cd '" + dir.path().string() + "' && unshare -rm sh full.sh");
  if (rc == 77) GTEST_SKIP() << "cannot mount a tmpfs in a user namespace here";
  ASSERT_EQ(rc, 0);
  const std::string log = testing::read_text(dir / "train.log");
  EXPECT_EQ(testing::read_text(dir / "train.rc"), "1\n") << log;
  const std::string error = log.substr(log.rfind("hwtrain: "));
  EXPECT_EQ(error.find('\n'), error.size() - 1) << "one line: " << error;
  EXPECT_NE(error.find("disk/run/checkpoints/"), std::string::npos) << error;
  EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
  const std::string checkpoints = testing::read_text(dir / "checkpoints.txt");
  EXPECT_EQ(checkpoints, ".\n..\nstep_00000002\n") << "the first checkpoint, and no staging directory";
  EXPECT_EQ(testing::read_text(dir / "eval.rc"), "0\n") << testing::read_text(dir / "eval.log");
  EXPECT_NE(testing::read_text(dir / "eval.log").find("val_loss"), std::string::npos);
}

}  // namespace full_disk
}  // namespace hwt
