// `hwtrain lr-find` end to end on the tiny model: the ramp's learning rates in lr_find.json grow
// exponentially step by step as the run really used them (metrics.jsonl's lr), and a suggestion
// inside the ramp is printed and plotted.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

std::string text_of(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(LrFind, RampsTheRunsLearningRateAndSuggestsOneInsideIt) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string cmd = "cd '" + dir.path().string() + "' && " + HWTRAIN_BINARY +
                          " lr-find --data corpus --set data.document_separator=% --set data.cache_dir=cache "
                          "--set model.preset=tiny --set train.device=cpu --set log.tensorboard=false "
                          "--set train.lr=0.5 --set train.lr_schedule=cosine "  // the test's own win over these
                          "--steps 60 --start-lr 1e-5 --end-lr 1 --out lrf > out.log 2>&1";
  const int status = std::system(cmd.c_str());
  const std::string out = text_of(dir / "out.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("suggested learning rate: "), std::string::npos) << out;
  const auto j = nlohmann::json::parse(text_of(dir / "lrf" / "lr_find.json"));
  const auto& points = j.at("points");
  ASSERT_GE(points.size(), 16u) << j.dump();
  // The learning rates the trainer logged are the ramp's: 1e-5 * 1e5^(k / 59).
  std::ifstream metrics(dir / "lrf" / "metrics.jsonl");
  std::string line;
  size_t k = 0;
  while (std::getline(metrics, line) && k < points.size()) {
    const auto m = nlohmann::json::parse(line);
    if (m.value("type", "") != "step") continue;
    const double expected = 1e-5 * std::pow(1e5, static_cast<double>(m.at("step").get<int>() - 1) / 59.0);
    EXPECT_NEAR(m.at("lr").get<double>() / expected, 1.0, 1e-6) << line;
    EXPECT_NEAR(points[m.at("step").get<int>() - 1].at("lr").get<double>() / expected, 1.0, 1e-9);
    ++k;
  }
  EXPECT_GT(k, 0u) << "metrics.jsonl has step records";
  const double steepest = j.at("suggestion").at("steepest").get<double>();
  EXPECT_GT(steepest, 1e-5);
  EXPECT_LT(steepest, 1.0);
  EXPECT_NE(text_of(dir / "lrf" / "lr_find.svg").find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace hwt
