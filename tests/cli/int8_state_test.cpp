// optimization.optimizer_state_dtype = int8 end to end: 300 steps of the tiny model end within 2%
// of fp32 AdamW's validation loss, with the optimizer state about a quarter of fp32's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

double last_val_loss(const std::filesystem::path& jsonl) {
  std::ifstream in(jsonl);
  std::string line;
  double val = NAN;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("val_loss") && j["val_loss"].is_number()) val = j["val_loss"];
  }
  return val;
}

TEST(Int8OptimizerState, TracksFp32AdamWOnTheTinyModel) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string common =
      "train --data corpus --set data.document_separator=% --set data.cache_dir=cache --set model.preset=tiny "
      "--set train.max_steps=300 --set train.eval_interval=300 --set train.sample_tokens=0 --set train.time_budget=0 "
      "--set log.tensorboard=false --set log.gpu_log_interval=0 --set log.report=false --set train.device=cpu "
      "--set checkpoint.save_final=false";
  for (const char* dtype : {"fp32", "int8"}) {
    const std::string cmd = "cd '" + dir.path().string() + "' && " + HWTRAIN_BINARY + " " + common +
                            " --set optimization.optimizer_state_dtype=" + dtype + " --out " + dtype + " > " + dtype +
                            ".log 2>&1";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(dir / (std::string(dtype) + ".log"));
  }
  const double fp32 = last_val_loss(dir / "fp32" / "metrics.jsonl"), int8 = last_val_loss(dir / "int8" / "metrics.jsonl");
  ASSERT_TRUE(std::isfinite(fp32) && std::isfinite(int8));
  EXPECT_NEAR(int8 / fp32, 1.0, 0.02) << "fp32 " << fp32 << ", int8 " << int8;
  const std::string log = read_text(dir / "int8.log");
  EXPECT_NE(log.find("8-bit block-wise moments"), std::string::npos) << log;
  // The state the optimizer holds ("optimizer state on rank 0: 254.5 KiB"): about a quarter.
  auto state_kib = [](const std::string& text) {
    const size_t at = text.find("optimizer state on rank 0: ");
    if (at == std::string::npos) return -1.0;
    const double v = std::stod(text.substr(at + 27));
    return text.compare(text.find(' ', at + 27) + 1, 3, "MiB") == 0 ? v * 1024 : v;
  };
  const double f = state_kib(read_text(dir / "fp32.log")), q = state_kib(log);
  ASSERT_GT(f, 0);
  ASSERT_GT(q, 0);
  EXPECT_LE(q / f, 0.27) << q << " KiB vs " << f << " KiB";
}

}  // namespace
}  // namespace hwt
