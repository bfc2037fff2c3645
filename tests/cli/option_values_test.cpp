// Repeatable options take one value each, so the inputs and checkpoints that follow them stay
// inputs: `prepare a --exclude '*.md' b` reads b (it was taken as a second pattern, silently), and
// `eval --set k=v RUN` evaluates RUN.
#include <gtest/gtest.h>

#include "support/shell.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

TEST(OptionValues, RepeatableOptionsTakeOneValueEach) {
  testing::TempDir dir;
  dir.write("a/x.txt", "first document\n%\nsecond one here\n");
  dir.write("a/skip.md", "not read\n");
  dir.write("b/y.txt", "third document\n%\nfourth\n");
  ASSERT_EQ(testing::hwtrain_in(dir.path(), "prepare a --exclude '*.md' b --separator % --val-fraction 0.25 -o x.hwt",
                                "x.log"),
            0)
      << testing::read_text(dir / "x.log");
  EXPECT_NE(testing::read_text(dir / "x.log").find("2 files, 4 documents"), std::string::npos)
      << testing::read_text(dir / "x.log");
  ASSERT_EQ(testing::hwtrain_in(dir.path(), "prepare --include '*.txt' a b --separator % --val-fraction 0.25 -o y.hwt",
                                "y.log"),
            0)
      << testing::read_text(dir / "y.log");
  EXPECT_NE(testing::read_text(dir / "y.log").find("2 files, 4 documents"), std::string::npos)
      << testing::read_text(dir / "y.log");
  // eval names the run after --set: the checkpoint it looks for is nested's, not runs/latest's.
  EXPECT_NE(testing::hwtrain_in(dir.path(), "eval --set train.micro_batch_size=2 nested", "e.log"), 0);
  EXPECT_NE(testing::read_text(dir / "e.log").find("checkpoint nested does not exist"), std::string::npos)
      << testing::read_text(dir / "e.log");
}

}  // namespace
}  // namespace hwt
