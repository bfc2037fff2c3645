// `hwtrain sweep` end to end: real `hwtrain train` trials of the tiny model, two at a time on this
// machine's cores, a study that resumes without rerunning anything, best.toml that trains, and the
// one-line errors for a space the run config would not accept.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

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
  std::istringstream rows(log);
  for (std::string row; std::getline(rows, row);) {  // "N  complete  <val_loss>  <seconds>  <params>"
    std::istringstream fields(row);
    std::string number, state, value, seconds;
    fields >> number >> state >> value >> seconds;
    if (state == "complete") {
      EXPECT_NE(seconds, "-") << "earlier trials keep their seconds: " << row;
    }
  }
  // best.toml is a train config: the base's keys and the best trial's values.
  const std::string best = slurp(dir_ / "sweep" / "best.toml");
  EXPECT_NE(best.find("lr_schedule"), std::string::npos) << best;
  EXPECT_NE(best.find("data.hwt"), std::string::npos) << best;
  ASSERT_EQ(hwtrain_in(dir_, "plan --config sweep/best.toml", log), 0) << log;
}

// Two sweep processes on one study (two machines sharing a file system, Slurm array tasks): they
// share its budget through the database, each trial run once.
TEST_F(SweepCommand, TwoProcessesShareOneStudy) {
  dir_.write("sweep.toml",
             "[sweep]\nbase_config = \"run.toml\"\ntrials = 4\nsampler = \"random\"\nparallel = 1\n"
             "[sweep.space.\"train.lr\"]\ntype = \"log_uniform\"\nlow = 1e-3\nhigh = 1e-2\n");
  const std::string sweep = std::string(HWTRAIN_BINARY) + " sweep --config sweep.toml";
  const std::string cmd = "cd '" + dir_.path().string() + "' && (" + sweep + " > a.log 2>&1 & pa=$!; " + sweep +
                          " > b.log 2>&1; rb=$?; wait $pa; ra=$?; exit $((ra | rb)))";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(dir_ / "a.log") << slurp(dir_ / "b.log");
  const std::string a = slurp(dir_ / "a.log"), b = slurp(dir_ / "b.log");
  std::string log;
  ASSERT_EQ(hwtrain_in(dir_, "sweep --config sweep.toml", log), 0) << log;
  EXPECT_NE(log.find("4 of 4 trials exist"), std::string::npos) << log;
  std::istringstream rows(log);
  std::set<std::string> numbers;
  for (std::string row; std::getline(rows, row);) {
    std::istringstream fields(row);
    std::string number, state;
    fields >> number >> state;
    if (state == "complete") numbers.insert(number);
  }
  EXPECT_EQ(numbers, (std::set<std::string>{"0", "1", "2", "3"})) << log;
  // Both processes ran trials (each started at least one), and no trial ran twice.
  size_t started = 0;
  for (const std::string* l : {&a, &b}) {
    for (size_t at = l->find(" started in slot"); at != std::string::npos; at = l->find(" started in slot", at + 1)) {
      ++started;
    }
  }
  EXPECT_EQ(started, 4u) << a << b;
  EXPECT_NE(a.find(" started in slot"), std::string::npos) << a;
  EXPECT_NE(b.find(" started in slot"), std::string::npos) << b;
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
