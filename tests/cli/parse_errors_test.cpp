// Command-line mistakes are one line naming what was typed and the closest valid command or option
// (cli/commands.h's report_parse_error), with a non-zero exit; help still exits 0.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/shell.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

struct Said {
  int code;
  std::string text;
};

Said hwtrain(const testing::TempDir& dir, const std::string& args) {
  const int code = testing::hwtrain_in(dir.path(), args, "out.txt");
  return {code, testing::read_text(dir / "out.txt")};
}

void expect_line(const Said& s, const std::string& wanted) {
  EXPECT_NE(s.code, 0) << s.text;
  EXPECT_EQ(s.text.rfind("hwtrain: ", 0), 0u) << s.text;
  EXPECT_EQ(std::count(s.text.begin(), s.text.end(), '\n'), 1) << s.text;
  EXPECT_NE(s.text.find(wanted), std::string::npos) << s.text;
}

TEST(ParseErrors, AMisspelledCommandOrOptionNamesTheClosestOne) {
  testing::TempDir dir;
  expect_line(hwtrain(dir, "trian"), "unknown command 'trian' (did you mean 'train'?); commands: train, prepare");
  expect_line(hwtrain(dir, ""), "a command is required: train, prepare");
  expect_line(hwtrain(dir, "tokenizer trian"), "tokenizer: unknown command 'trian' (did you mean 'train'?)");
  expect_line(hwtrain(dir, "train --overwrit --set a=-1"),
              "train: unknown option '--overwrit' (did you mean '--overwrite'?); see hwtrain train --help");
  expect_line(hwtrain(dir, "train --out=x --ovewrite=1"), "unknown option '--ovewrite' (did you mean '--overwrite'?)");
  // What is not a misspelling keeps CLI11's words, with the command's help.
  expect_line(hwtrain(dir, "train stray"),
              "train: The following argument was not expected: stray (see hwtrain train --help)");
  // A value of the wrong type is CLI11's message, not a guess about the options after it.
  expect_line(hwtrain(dir, "launch --nproc-per-node two train --set a=1"), "launch: ");
  EXPECT_EQ(hwtrain(dir, "launch --nproc-per-node two train --set a=1").text.find("unknown option"), std::string::npos);
  EXPECT_EQ(hwtrain(dir, "train --help").code, 0);
  EXPECT_EQ(hwtrain(dir, "--version").code, 0);
}

}  // namespace
}  // namespace hwt
