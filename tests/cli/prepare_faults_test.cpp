// kill -9 during `hwtrain prepare` into a directory that holds a dataset (issue 19): the previous
// dataset survives byte for byte, and the next prepare cleans up and completes. The kill comes
// with HWTRAIN_FAULT=prepare:0:KILL (core/fault_injection.h) when the new dataset is complete in
// its staging directory: the last moment before it would replace the old one.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "support/shell.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

std::vector<std::string> leftovers(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".data.", 0) == 0) out.push_back(name);
  }
  return out;
}

TEST(PrepareFaults, KillDashNineKeepsThePreviousDatasetAndTheNextPrepareCompletes) {
  testing::TempDir dir;
  std::string a, b;
  for (int i = 0; i < 300; ++i) a += "First corpus, line " + std::to_string(i) + ".\n%\n";
  for (int i = 0; i < 300; ++i) b += "Second corpus, another line " + std::to_string(i * 7) + ".\n%\n";
  dir.write("a/text.txt", a);
  dir.write("b/text.txt", b);
  const std::string cd = "cd '" + dir.path().string() + "' && ";
  const std::string bin = HWTRAIN_BINARY;
  ASSERT_EQ(testing::run_shell(cd + bin + " prepare a --separator % -o data > a.log 2>&1"), 0) << testing::read_text(dir / "a.log");
  const std::string manifest = testing::read_text(dir / "data/manifest.json");
  ASSERT_FALSE(manifest.empty());

  const int killed = testing::run_shell(cd + "HWTRAIN_FAULT=prepare:0:KILL " + bin + " prepare b --separator % -o data > b.log 2>&1");
  EXPECT_EQ(killed, 128 + SIGKILL) << testing::read_text(dir / "b.log");
  EXPECT_EQ(testing::read_text(dir / "data/manifest.json"), manifest) << "the old dataset was touched";
  EXPECT_EQ(leftovers(dir.path()).size(), 1u);  // the killed prepare's staging directory
  // The old dataset still trains.
  EXPECT_EQ(testing::run_shell(cd + bin + " train --data data --set model.preset=tiny --set train.max_steps=2 "
                      "--set train.eval_interval=0 --set train.sample_tokens=0 --set log.report=false "
                      "--set log.tensorboard=false --set train.time_budget=0 --out run > t.log 2>&1"),
            0)
      << testing::read_text(dir / "t.log");

  ASSERT_EQ(testing::run_shell(cd + bin + " prepare b --separator % -o data > b2.log 2>&1"), 0) << testing::read_text(dir / "b2.log");
  EXPECT_NE(testing::read_text(dir / "data/manifest.json"), manifest);
  EXPECT_TRUE(leftovers(dir.path()).empty());
}

}  // namespace
}  // namespace hwt
