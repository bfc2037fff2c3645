// optimization.optimizer_state_device = cpu end to end (train/adamw.h's host_state). On this CPU the
// host is the device, so the offloaded optimizer must give the device optimizer's losses bit for bit
// (fp32 and bf16 autocast), and so must a run resumed from its checkpoint; 2 ZeRO-3 ranks with
// offloaded moments give one process's losses within 1e-5 over 20 steps with accumulation and
// recomputation; TP2 and PP2 ranks give the device optimizer's losses bit for bit. (What it saves on a
// GPU is in docs/benchmarks.md once measured there.)
#include <gtest/gtest.h>

#include "support/run_metrics.h"
#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace offload_cli {

using testing::step_losses;

int hwtrain(const std::string& args, const std::filesystem::path& cwd) {
  return testing::run_shell("cd '" + cwd.string() + "' && " + HWTRAIN_BINARY + " " + args + " > /dev/null 2>&1");
}

const std::string kCommon =
    "--data corpus --set data.document_separator=% --set data.cache_dir=cache --set model.preset=tiny "
    "--set train.eval_interval=0 --set train.sample_tokens=0 --set train.log_interval=1 "
    "--set train.time_budget=0 --set train.grad_accum_steps=2 --set log.tensorboard=false "
    "--set log.gpu_log_interval=0 --set log.report=false --set optimization.intra_op_threads=1 "
    "--set train.device=cpu ";

TEST(OffloadedOptimizer, OneProcessGivesTheDeviceOptimizersLossesBitForBit) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  for (const std::string precision : {"fp32", "bf16"}) {
    const std::string run = kCommon + "--set optimization.mixed_precision_dtype=" + precision +
                            " --set train.micro_batch_size=4 --set checkpoint.save_final=true ";
    const std::string device = precision + "-device", host = precision + "-host";
    ASSERT_EQ(hwtrain("train " + run + "--set train.max_steps=12 --out " + device, dir.path()), 0);
    ASSERT_EQ(hwtrain("train " + run + "--set train.max_steps=12 --set optimization.optimizer_state_device=cpu --out " +
                          host,
                      dir.path()),
              0);
    // Both resume: the offloaded optimizer from its own checkpoint, continuing like the device one.
    ASSERT_EQ(hwtrain("train " + run + "--set train.max_steps=14 --resume " + device, dir.path()), 0);
    ASSERT_EQ(hwtrain("train " + run + "--set train.max_steps=14 --set optimization.optimizer_state_device=cpu "
                          "--resume " + host,
                      dir.path()),
              0);
    const std::vector<double> a = step_losses(dir / device / "metrics.jsonl"),
                              b = step_losses(dir / host / "metrics.jsonl");
    ASSERT_EQ(a.size(), 14u) << precision;
    ASSERT_EQ(b.size(), 14u) << precision;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << precision << ", step " << i + 1;
  }
}

TEST(OffloadedOptimizer, TwoZero3RanksMatchOneProcess) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string run = kCommon + "--set optimization.mixed_precision_dtype=fp32 --set optimization.checkpoint_every=1 "
                                    "--set train.max_steps=20 --set checkpoint.save_final=false ";
  ASSERT_EQ(hwtrain("train " + run + "--set train.micro_batch_size=4 --out one", dir.path()), 0);
  ASSERT_EQ(hwtrain("launch --nproc-per-node 2 --master-port 29731 -- train " + run +
                        "--set train.micro_batch_size=2 --set dist.sharding=zero3 "
                        "--set optimization.optimizer_state_device=cpu --out two",
                    dir.path()),
            0);
  const std::vector<double> a = step_losses(dir / "one" / "metrics.jsonl"), b = step_losses(dir / "two" / "metrics.jsonl");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
}

// Tensor and pipeline parallelism (2 ranks, Gloo): each rank's offloaded optimizer over its own
// weights gives the device optimizer's losses bit for bit, accumulation on, checkpoint gathered.
TEST(OffloadedOptimizer, TensorAndPipelineRanksGiveTheDeviceOptimizersLosses) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  int port = 29733;
  for (const std::string layout : {"tensor_parallel", "pipeline_parallel"}) {
    for (const std::string state : {"device", "cpu"}) {
      ASSERT_EQ(hwtrain("launch --nproc-per-node 2 --master-port " + std::to_string(port++) + " -- train " + kCommon +
                            "--set model.preset=llama-tiny --set optimization.mixed_precision_dtype=fp32 "
                            "--set train.max_steps=6 --set train.micro_batch_size=2 --set checkpoint.save_final=true "
                            "--set dist." + layout + "=2 --set optimization.optimizer_state_device=" + state +
                            " --out " + layout + "-" + state,
                        dir.path()),
                0)
          << layout << " " << state;
    }
    const std::vector<double> a = step_losses(dir / (layout + "-device") / "metrics.jsonl"),
                              b = step_losses(dir / (layout + "-cpu") / "metrics.jsonl");
    ASSERT_EQ(a.size(), 6u) << layout;
    ASSERT_EQ(b.size(), 6u) << layout;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << layout << ", step " << i + 1;
    EXPECT_TRUE(std::filesystem::exists(dir / (layout + "-cpu") / "checkpoints" / "step_00000006")) << layout;
  }
}

}  // namespace offload_cli
}  // namespace hwt
