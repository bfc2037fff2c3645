// early_stopping.restore_best_weights over ranks that shard the weights (ZeRO-2/3 snapshot and
// restore their own fp32 master shards), also the replicas of a pipeline or a tensor-parallel split
// model: the run stops at the step one process stops at, restores the weights of the best
// evaluation, and its final checkpoint evaluates as one process's does. The monitor only ever
// improves at the first evaluation (min_delta 10), so the run stops at step 6 with the weights of
// step 2.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace restore_best_cli {

int hwtrain(const std::string& args, const std::filesystem::path& cwd, const std::string& log) {
  const std::string cmd = "cd '" + cwd.string() + "' && " + HWTRAIN_BINARY + " " + args + " > " + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The validation loss `hwtrain eval` prints for the run in `run` (NaN when it prints none).
double evaluated(const testing::TempDir& dir, const std::string& run) {
  const std::string log = run + "-eval.log";
  EXPECT_EQ(hwtrain("eval " + run + " --batches 4 --set train.micro_batch_size=2", dir.path(), log), 0)
      << testing::read_text(dir / log);
  const std::string text = testing::read_text(dir / log);
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("val_loss[ =:]+([0-9.]+)"))) {
    ADD_FAILURE() << text;
    return NAN;
  }
  return std::stod(m[1]);
}

const std::string kCommon =
    "--data corpus --set data.document_separator=% --set data.cache_dir=cache --set model.preset=tiny "
    "--set model.n_head=4 --set train.sample_tokens=0 --set train.log_interval=1 --set train.time_budget=0 "
    "--set optimization.mixed_precision_dtype=fp32 --set train.grad_accum_steps=2 --set log.tensorboard=false "
    "--set log.gpu_log_interval=0 --set log.report=false --set optimization.intra_op_threads=1 "
    "--set train.device=cpu --set optimization.checkpoint_every=1 --set train.eval_interval=2 "
    "--set train.eval_batches=2 --set train.max_steps=20 --set checkpoint.save_final=true "
    "--set early_stopping.enabled=true --set early_stopping.monitor=val_loss --set early_stopping.patience=2 "
    "--set early_stopping.min_delta=10 --set early_stopping.restore_best_weights=true ";

// "zero2", "zero3" (2 ranks), "pipeline_zero3", "tensor_zero2" (2 replicas of a split model)
struct RestoreBest : ::testing::TestWithParam<std::string> {};

TEST_P(RestoreBest, ShardedRanksRestoreTheBestWeightsAsOneProcess) {
  const std::string layout = GetParam();
  const bool pipeline = layout.rfind("pipeline", 0) == 0, tensor = layout.rfind("tensor", 0) == 0;
  const std::string sharding = pipeline || tensor ? layout.substr(layout.find('_') + 1) : layout;
  const int port = pipeline ? 29828 : tensor ? 29829 : layout == "zero2" ? 29826 : 29827;
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  ASSERT_EQ(hwtrain("train " + kCommon + "--set dist.sharding=none --set train.micro_batch_size=4 --out one", dir.path(),
                    "one.log"),
            0)
      << testing::read_text(dir / "one.log");
  const std::string split_by = pipeline ? " --set dist.pipeline_parallel=2" : tensor ? " --set dist.tensor_parallel=2" : "";
  ASSERT_EQ(hwtrain("launch --nproc-per-node " + std::string(split_by.empty() ? "2" : "4") + " --master-port " +
                        std::to_string(port) + " -- train " + kCommon + "--set train.micro_batch_size=2 " +
                        "--set dist.sharding=" + sharding + split_by + " --out split",
                    dir.path(), "split.log"),
            0)
      << testing::read_text(dir / "split.log");
  const std::string one = testing::read_text(dir / "one.log"), split = testing::read_text(dir / "split.log");
  EXPECT_NE(one.find("early stopping: restored the weights of step 2"), std::string::npos) << one;
  // The run evaluates the restored weights last: its final val_loss is step 2's, not step 6's.
  std::vector<double> val;
  std::ifstream records(dir / "one" / "metrics.jsonl");
  for (std::string line; std::getline(records, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("type", "") == "eval") val.push_back(j.at("val_loss").get<double>());
  }
  ASSERT_GE(val.size(), 4u);
  EXPECT_EQ(val.back(), val.front());
  EXPECT_NE(split.find("[rank 0] early stopping: restored the weights of step 2"), std::string::npos) << split;
  EXPECT_NE(split.find(sharding + ": "), std::string::npos) << split;  // the engine's line
  // Steps 3-6 moved the weights: only every rank's restored shards evaluate as one process's weights.
  EXPECT_NEAR(evaluated(dir, "split"), evaluated(dir, "one"), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Layouts, RestoreBest, ::testing::Values("zero2", "zero3", "pipeline_zero3", "tensor_zero2"),
                         [](const auto& info) { return info.param; });

}  // namespace restore_best_cli
}  // namespace hwt
