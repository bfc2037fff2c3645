// Data parallelism end to end through `hwtrain launch`: 2 ranks with micro-batch B give the same
// losses over 20 steps as 1 rank with micro-batch 2B (fp32, gradient accumulation on), with plain
// DDP and with each sharding (ZeRO-2/3 also with activation checkpointing); a sharded run's
// checkpoint must resume in a single process and continue like it, and a ZeRO-2/3 one also on 2
// sharded ranks, each reading only its own shard file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "support/run_metrics.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

std::vector<double> losses(const std::filesystem::path& jsonl) { return testing::step_losses(jsonl); }

int run(const std::string& args, const std::filesystem::path& cwd) {
  std::string cmd = "cd '" + cwd.string() + "' && " + HWTRAIN_BINARY + " " + args + " > /dev/null 2>&1";
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs `args` in `cwd` with its output in the file `log` there: the exit status and the log's text.
std::pair<int, std::string> run_logged(const std::string& args, const std::filesystem::path& cwd, const std::string& log) {
  const std::string cmd = "cd '" + cwd.string() + "' && " + HWTRAIN_BINARY + " " + args + " > " + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(cwd / log);
  return {status, std::string((std::istreambuf_iterator<char>(in)), {})};
}

// Both ranks' logs carry `line` ("[rank r] <line>").
void expect_both_ranks_say(const std::string& text, const std::string& line) {
  for (int r = 0; r < 2; ++r) EXPECT_NE(text.find("[rank " + std::to_string(r) + "] " + line), std::string::npos) << text;
}

struct TwoRanks : ::testing::TestWithParam<std::string> {};  // dist.sharding

TEST_P(TwoRanks, MatchOneRankWithTwiceTheBatch) {
  const std::string sharding = GetParam();
  const bool sharded = sharding != "none";
  const bool recompute = sharding == "zero2" || sharding == "zero3";
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string common =
      "--data corpus --set data.document_separator=% --set data.cache_dir=cache --set model.preset=tiny "
      "--set train.eval_interval=0 --set train.sample_tokens=0 --set train.log_interval=1 "
      "--set train.time_budget=0 --set optimization.mixed_precision_dtype=fp32 --set train.grad_accum_steps=2 "
      "--set log.tensorboard=false --set log.gpu_log_interval=0 --set log.report=false "
      "--set optimization.intra_op_threads=1 --set train.device=cpu"  // Gloo on CPU, also on GPU machines
      " --set optimization.checkpoint_every=" + std::string(recompute ? "1" : "0");
  const std::string steps = " --set train.max_steps=20 --set checkpoint.save_final=" + std::string(sharded ? "true" : "false");
  ASSERT_EQ(run("train " + common + steps + " --set train.micro_batch_size=4 --out one", dir.path()), 0);
  const int port = sharding == "none" ? 29617 : sharding == "zero1" ? 29619 : sharding == "zero2" ? 29625 : 29627;
  ASSERT_EQ(run("launch --nproc-per-node 2 --master-port " + std::to_string(port) + " -- train " + common + steps +
                    " --set train.micro_batch_size=2 --set dist.sharding=" + sharding + " --out two",
                dir.path()),
            0);
  auto a = losses(dir / "one" / "metrics.jsonl"), b = losses(dir / "two" / "metrics.jsonl");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
  if (!sharded) return;
  if (recompute) {  // ZeRO-2/3 checkpoints are sharded: one file per rank and sharding.json
    const auto ckpt = dir / "two" / "checkpoints" / "step_00000020";
    EXPECT_TRUE(std::filesystem::exists(ckpt / "shard-00000-of-00002.safetensors"));
    EXPECT_TRUE(std::filesystem::exists(ckpt / "shard-00001-of-00002.safetensors"));
    EXPECT_TRUE(std::filesystem::exists(ckpt / "sharding.json"));
    EXPECT_FALSE(std::filesystem::exists(ckpt / "model.safetensors"));
    std::filesystem::copy(dir / "two", dir / "broken", std::filesystem::copy_options::recursive);
    std::filesystem::remove(dir / "broken" / "checkpoints" / "step_00000020" / "shard-00001-of-00002.safetensors");
    const std::string eval = std::string(HWTRAIN_BINARY) + " eval broken --data corpus --set data.document_separator=% "
                             "--set data.cache_dir=cache > broken.log 2>&1";
    EXPECT_NE(std::system(("cd '" + dir.path().string() + "' && " + eval).c_str()), 0);
    std::ifstream log(dir / "broken.log");
    const std::string text((std::istreambuf_iterator<char>(log)), {});
    EXPECT_NE(text.find("shard-00001-of-00002.safetensors"), std::string::npos) << text;
    std::filesystem::copy(dir / "two", dir / "four", std::filesystem::copy_options::recursive);
    std::filesystem::copy(dir / "two", dir / "five", std::filesystem::copy_options::recursive);
  }
  // A single-process checkpoint resumes on 2 sharded ranks (ZeRO-3: the shards are cut from it).
  if (sharding == "zero3") std::filesystem::copy(dir / "one", dir / "three", std::filesystem::copy_options::recursive);
  // Rank 0 gathered both shards: one process resumes and continues like the single-rank run.
  ASSERT_EQ(run("train " + common + " --set train.max_steps=22 --set checkpoint.save_final=false"
                    " --set train.micro_batch_size=4 --resume two",
                dir.path()),
            0);
  ASSERT_EQ(run("train " + common + " --set train.max_steps=22 --set checkpoint.save_final=false"
                    " --set train.micro_batch_size=4 --resume one",
                dir.path()),
            0);
  auto a2 = losses(dir / "one" / "metrics.jsonl"), b2 = losses(dir / "two" / "metrics.jsonl");
  ASSERT_EQ(a2.size(), 22u);
  ASSERT_EQ(b2.size(), 22u);
  for (size_t i = 20; i < 22; ++i) EXPECT_NEAR(a2[i], b2[i], 1e-5) << "step " << i + 1;
  if (recompute) {  // the sharded checkpoint on 2 sharded ranks: each reads its own shard file only
    const std::string resume = "launch --nproc-per-node 2 --master-port " + std::to_string(port + 1) + " -- train " +
                               common + " --set train.max_steps=22 --set checkpoint.save_final=false"
                               " --set train.micro_batch_size=2 --set dist.sharding=" + sharding + " --resume ";
    const auto [rc, text] = run_logged(resume + "four", dir.path(), "four.log");
    ASSERT_EQ(rc, 0) << text;
    expect_both_ranks_say(text, "read this rank's segments from 1 of the 2 shard files");
    auto d2 = losses(dir / "four" / "metrics.jsonl");
    ASSERT_EQ(d2.size(), 22u);
    for (size_t i = 20; i < 22; ++i) EXPECT_NEAR(a2[i], d2[i], 1e-5) << "step " << i + 1 << " resumed from shards";
    // A damaged shard only rank 1 reads: both ranks stop (rank 0 is told), rank 1 names the file.
    const auto shard1 = dir / "five" / "checkpoints" / "step_00000020" / "shard-00001-of-00002.safetensors";
    {
      std::fstream f(shard1, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-1, std::ios::end);
      f.put('\x7f');
    }
    const auto [rc5, text5] = run_logged(resume + "five", dir.path(), "five.log");
    EXPECT_NE(rc5, 0);
    EXPECT_NE(text5.find("shard-00001-of-00002.safetensors fails its CRC32C check"), std::string::npos) << text5;
    EXPECT_NE(text5.find("another rank could not read its part"), std::string::npos) << text5;
  }
  if (sharding != "zero3") return;
  // Each rank reads its own ranges of the one-process checkpoint's weights and moments, not all of them.
  const auto [rc3, text3] = run_logged("launch --nproc-per-node 2 --master-port " + std::to_string(port + 2) +
                                           " -- train " + common + " --set train.max_steps=22 --set checkpoint.save_final=false"
                                           " --set train.micro_batch_size=2 --set dist.sharding=zero3 --resume three",
                                       dir.path(), "three.log");
  ASSERT_EQ(rc3, 0) << text3;
  expect_both_ranks_say(text3, "read this rank's segments of the one-process checkpoint");
  auto c2 = losses(dir / "three" / "metrics.jsonl");
  ASSERT_EQ(c2.size(), 22u);
  for (size_t i = 20; i < 22; ++i) EXPECT_NEAR(a2[i], c2[i], 1e-5) << "step " << i + 1 << " resumed on 2 ranks";
}

INSTANTIATE_TEST_SUITE_P(DataParallel, TwoRanks, ::testing::Values("none", "zero1", "zero2", "zero3"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// A rank of a real training run killed mid-run, as under torchrun (no launcher to notice): the
// survivor must stop non-zero within dist.timeout, naming the dead rank.
TEST(DataParallel, KilledRankStopsTheOtherWithinTheTimeout) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string args =
      "train --data corpus --set data.document_separator=% --set data.cache_dir=cache --set model.preset=tiny "
      "--set train.max_steps=1000000 --set train.eval_interval=0 --set train.sample_tokens=0 "
      "--set train.log_interval=1 --set log.progress=lines --set train.time_budget=0 --set log.report=false "
      "--set checkpoint.save_final=false --set optimization.intra_op_threads=1 --set dist.timeout=10 "
      "--set train.device=cpu --out run";
  dir.write("kill.sh",
            "export MASTER_ADDR=127.0.0.1 MASTER_PORT=29623 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2\n"
            "RANK=0 LOCAL_RANK=0 " + std::string(HWTRAIN_BINARY) + " " + args + " > r0.log 2>&1 & P0=$!\n"
            "RANK=1 LOCAL_RANK=1 " + std::string(HWTRAIN_BINARY) + " " + args + " > r1.log 2>&1 & P1=$!\n"
            "for i in $(seq 1200); do grep -q 'step 3 |' r0.log && break; sleep 0.1; done\n"
            "kill -KILL $P1; start=$(date +%s%N)\n"
            "wait $P0; rc=$?\n"
            "echo $rc $(( ($(date +%s%N) - start) / 1000000 )) > result\n");
  const std::string cmd = "cd '" + dir.path().string() + "' && bash kill.sh";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(dir / "result");
  int rc = 0;
  long ms = 0;
  ASSERT_TRUE(in >> rc >> ms);
  const std::string log = [&] {
    std::ifstream f(dir / "r0.log");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }();
  ASSERT_NE(log.find("step 3 |"), std::string::npos) << log;  // it was training when rank 1 died
  EXPECT_NE(rc, 0) << log;
  EXPECT_LT(ms, 10000 + 15000) << log;  // dist.timeout plus time to report and exit
  EXPECT_NE(log.find("rank 1"), std::string::npos) << log;
}

}  // namespace
}  // namespace hwt
