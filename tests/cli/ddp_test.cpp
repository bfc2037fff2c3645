// Data parallelism end to end through `hwtrain launch`: 2 ranks with micro-batch B give the same
// losses over 20 steps as 1 rank with micro-batch 2B (fp32, gradient accumulation on).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "support/temp_dir.h"

namespace hwt {
namespace {

std::vector<double> losses(const std::filesystem::path& jsonl) {
  std::vector<double> out;
  std::ifstream in(jsonl);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "step" && j["loss"].is_number()) out.push_back(j["loss"]);
  }
  return out;
}

int run(const std::string& args, const std::filesystem::path& cwd) {
  std::string cmd = "cd '" + cwd.string() + "' && " + HWTRAIN_BINARY + " " + args + " > /dev/null 2>&1";
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(DataParallel, TwoRanksMatchOneRankWithTwiceTheBatch) {
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 600; ++i) text += "Line " + std::to_string(i * 7919 % 1000) + " of a small corpus.\n%\n";
  dir.write("corpus/a.txt", text);
  const std::string common =
      "--data corpus --set data.document_separator=% --set data.cache_dir=cache --set model.preset=tiny "
      "--set train.max_steps=20 --set train.eval_interval=0 --set train.sample_tokens=0 --set train.log_interval=1 "
      "--set train.time_budget=0 --set optimization.mixed_precision_dtype=fp32 --set train.grad_accum_steps=2 "
      "--set log.tensorboard=false --set log.gpu_log_interval=0 --set log.report=false "
      "--set checkpoint.save_final=false --set optimization.intra_op_threads=1";
  ASSERT_EQ(run("train " + common + " --set train.micro_batch_size=4 --out one", dir.path()), 0);
  ASSERT_EQ(run("launch --nproc-per-node 2 --master-port 29617 -- train " + common +
                    " --set train.micro_batch_size=2 --out two",
                dir.path()),
            0);
  auto a = losses(dir / "one" / "metrics.jsonl"), b = losses(dir / "two" / "metrics.jsonl");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
}

}  // namespace
}  // namespace hwt
