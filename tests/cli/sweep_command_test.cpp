// `hwtrain sweep` end to end: real `hwtrain train` trials of the tiny model, two at a time on this
// machine's cores, a study that resumes without rerunning anything, best.toml that trains, and the
// one-line errors for a space the run config would not accept.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `args` in `dir`; returns the exit code, output in `log`.
int hwtrain_in(const testing::TempDir& dir, const std::string& args, std::string& log) {
  const std::string cmd = "cd '" + dir.path().string() + "' && " + HWTRAIN_BINARY + " " + args + " > out.log 2>&1";
  const int status = std::system(cmd.c_str());
  log = slurp(dir / "out.log");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class SweepCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.write("corpus/a.txt", testing::small_corpus());
    std::string log;
    ASSERT_EQ(hwtrain_in(dir_, "prepare corpus -o data.hwt --separator %", log), 0) << log;
    dir_.write("run.toml",
               "[data]\npath = \"" + (dir_ / "data.hwt").string() + "\"\n"
               "[model]\npreset = \"tiny\"\n"
               "[train]\nmax_steps = 12\neval_interval = 6\neval_batches = 2\nsample_tokens = 0\ntime_budget = 0\n"
               "device = \"cpu\"\n"
               "[log]\ntensorboard = false\nreport = false\ngpu_log_interval = 0\n"
               "[checkpoint]\nsave_final = false\n");
  }
  testing::TempDir dir_;
};

TEST_F(SweepCommand, RunsTrialsResumesAndWritesABestConfigThatTrains) {
  dir_.write("sweep.toml",
             "[sweep]\nbase_config = \"run.toml\"\ntrials = 3\nsampler = \"random\"\nseed = 7\n"
             "[sweep.space.\"train.lr\"]\ntype = \"log_uniform\"\nlow = 1e-3\nhigh = 1e-2\n"
             "[sweep.space.\"train.lr_schedule\"]\ntype = \"choice\"\nvalues = [\"cosine\", \"constant\"]\n");
  std::string log;
  ASSERT_EQ(hwtrain_in(dir_, "sweep --config sweep.toml", log), 0) << log;
  const std::string table = slurp(dir_ / "sweep" / "trials.txt");
  size_t complete = 0;
  for (size_t at = table.find("complete"); at != std::string::npos; at = table.find("complete", at + 1)) ++complete;
  EXPECT_EQ(complete, 3u) << table;
  const std::string report = slurp(dir_ / "sweep" / "report.html");
  EXPECT_NE(report.find("Optimization history"), std::string::npos);
  EXPECT_NE(report.find("Slice: train.lr"), std::string::npos);
  EXPECT_NE(log.find("trial(s) at once"), std::string::npos) << log;
  for (int n = 0; n < 3; ++n) {
    EXPECT_TRUE(std::filesystem::exists(dir_ / "sweep" / "trials" / std::to_string(n) / "metrics.jsonl")) << n;
  }
  // Again: the study is complete, nothing runs a second time.
  ASSERT_EQ(hwtrain_in(dir_, "sweep --config sweep.toml", log), 0) << log;
  EXPECT_NE(log.find("3 of 3 trials exist"), std::string::npos) << log;
  EXPECT_EQ(log.find("started"), std::string::npos) << log;
  // best.toml is a train config: the base's keys and the best trial's values.
  const std::string best = slurp(dir_ / "sweep" / "best.toml");
  EXPECT_NE(best.find("lr_schedule"), std::string::npos) << best;
  EXPECT_NE(best.find("data.hwt"), std::string::npos) << best;
  ASSERT_EQ(hwtrain_in(dir_, "plan --config sweep/best.toml", log), 0) << log;
}

TEST_F(SweepCommand, ASpaceTheRunWouldRefuseIsOneLineNamingTheKey) {
  auto error_for = [&](const std::string& space) {
    dir_.write("bad.toml", "[sweep]\nbase_config = \"run.toml\"\ntrials = 2\n" + space);
    std::string log;
    EXPECT_NE(hwtrain_in(dir_, "sweep --config bad.toml", log), 0) << log;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "bad" / "trials")) << "no trial may start";
    return log;
  };
  std::string log = error_for("[sweep.space.\"train.lrr\"]\ntype = \"uniform\"\nlow = 0.1\nhigh = 0.2\n");
  EXPECT_NE(log.find("train.lrr"), std::string::npos) << log;
  EXPECT_NE(log.find("did you mean 'train.lr'"), std::string::npos) << log;
  log = error_for("[sweep.space.\"optimization.mixed_precision_dtype\"]\ntype = \"choice\"\nvalues = [\"bf16\", \"bf17\"]\n");
  EXPECT_NE(log.find("optimization.mixed_precision_dtype"), std::string::npos) << log;
  EXPECT_NE(log.find("bf17"), std::string::npos) << log;
  log = error_for("[sweep.space.\"train.lr\"]\ntype = \"log_uniform\"\nlow = 0\nhigh = 0.1\n");
  EXPECT_NE(log.find("train.lr"), std::string::npos) << log;
}

}  // namespace
}  // namespace hwt
