// Tensor and pipeline parallelism end to end through `hwtrain launch` (Gloo, fp32, tiny models):
// TP2 and PP2 give the losses of one process within 1e-5 over 20 steps with gradient accumulation,
// for GPT-2 (with activation checkpointing; tied head split over the stages) and Llama (GQA);
// DP2 x TP2 and DP2 x PP2 on 4 ranks give those of one process with the same global batch; a
// checkpoint written at TP2 or PP2 holds whole tensors and resumes in one process with the
// continuation of the single-process run; dist.tensor_parallel / pipeline_parallel = auto runs the
// plan's layout; ZeRO-2 (ZeRO-3 with tensor parallelism) over the replicas of a split model gives the
// losses of one process and resumes in one or on the same mesh. A mesh that does not fit is one line
// naming the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <fstream>

#include "support/run_metrics.h"
#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"
#include "cli/model_parallel_args.h"

namespace hwt {
namespace model_parallel_cli {

using testing::step_losses;

// Steps [from, to) of two run directories' losses agree within 1e-5 (fp32: the same math, summed in
// another order); each run has `to` steps.
void expect_same_losses(const std::filesystem::path& run_a, const std::filesystem::path& run_b, size_t from, size_t to,
                        const std::string& what) {
  const std::vector<double> a = step_losses(run_a / "metrics.jsonl"), b = step_losses(run_b / "metrics.jsonl");
  ASSERT_EQ(a.size(), to) << what;
  ASSERT_EQ(b.size(), to) << what;
  for (size_t i = from; i < to; ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << what << ", step " << i + 1;
}

int hwtrain(const std::string& args, const std::filesystem::path& cwd, const std::string& log = "/dev/null") {
  return testing::hwtrain_in(cwd, args, log);
}

const std::string kCommon = testing::kModelParallelRun;

// Trains `common` for 20 steps in one process ("one") and launched on `nproc` ranks with `layout`
// ("split"): the same losses within 1e-5. Then both resume in one process for 4 more steps: the split
// run's checkpoint (whole tensors) continues as the single-process run's does. Returns the split log.
std::string expect_split_run_matches_one_process(const testing::TempDir& dir, const std::string& common, int nproc,
                                                 int port, const std::string& layout) {
  const std::string first = common + "--set train.max_steps=20 --set checkpoint.save_final=true ";
  EXPECT_EQ(hwtrain("train " + first + "--out one", dir.path()), 0);
  EXPECT_EQ(hwtrain("launch --nproc-per-node " + std::to_string(nproc) + " --master-port " + std::to_string(port) +
                        " -- train " + first + layout + " --out split",
                    dir.path(), "split.log"),
            0)
      << testing::read_text(dir / "split.log");
  expect_same_losses(dir / "one", dir / "split", 0, 20, "the run");
  const std::string more = "train " + common + "--set train.max_steps=24 --set checkpoint.save_final=false ";
  EXPECT_EQ(hwtrain(more + "--resume one", dir.path()), 0);
  EXPECT_EQ(hwtrain(more + "--resume split", dir.path(), "resume.log"), 0) << testing::read_text(dir / "resume.log");
  expect_same_losses(dir / "one", dir / "split", 20, 24, "resumed in one process");
  return testing::read_text(dir / "split.log");
}

// (model family, "tensor" or "pipeline")
struct ModelParallelRun : ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ModelParallelRun, TwoRanksMatchOneProcessAndTheCheckpointResumesInOne) {
  const bool llama = std::get<0>(GetParam()) == "llama", pipeline = std::get<1>(GetParam()) == "pipeline";
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string model = llama ? "--set model.preset=llama-tiny " : "--set model.preset=tiny --set model.n_head=4 "
                                                                       "--set optimization.checkpoint_every=1 ";
  const std::string common = kCommon + model + "--set train.micro_batch_size=2 --set train.grad_accum_steps=4 ";
  const int port = (llama ? 29703 : 29701) + (pipeline ? 10 : 0);
  const std::string log = expect_split_run_matches_one_process(
      dir, common, 2, port, pipeline ? "--set dist.pipeline_parallel=2" : "--set dist.tensor_parallel=2");
  EXPECT_NE(log.find(pipeline ? "1 data x 2 pipeline x 1 tensor" : "1 data x 1 pipeline x 2 tensor"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ModelParallelRun,
                         ::testing::Combine(::testing::Values("gpt2", "llama"), ::testing::Values("tensor", "pipeline")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

struct TwoReplicas : ::testing::TestWithParam<std::string> {};  // "tensor", "pipeline" or "pipeline_zero1"

TEST_P(TwoReplicas, OfTwoModelParallelRanksMatchOneProcess) {
  const bool pipeline = GetParam() != "tensor", zero1 = GetParam() == "pipeline_zero1";
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string common = kCommon + "--set model.preset=llama-tiny --set train.max_steps=20 "
                                       "--set checkpoint.save_final=false ";
  const std::string save = zero1 ? "--set checkpoint.save_final=true " : "";
  ASSERT_EQ(hwtrain("train " + common + save + "--set train.micro_batch_size=4 --out one", dir.path()), 0);
  ASSERT_EQ(hwtrain("launch --nproc-per-node 4 --master-port " + std::string(zero1 ? "29719" : pipeline ? "29715" : "29705") +
                        " -- train " + common + "--set train.micro_batch_size=2 " +
                        (pipeline ? "--set dist.pipeline_parallel=2" : "--set dist.tensor_parallel=2") +
                        (zero1 ? " --set dist.sharding=zero1 " + save : " ") + "--out four",
                    dir.path(), "four.log"),
            0)
      << testing::read_text(dir / "four.log");
  EXPECT_NE(testing::read_text(dir / "four.log").find(pipeline ? "2 data x 2 pipeline x 1 tensor" : "2 data x 1 pipeline x 2 tensor"),
            std::string::npos);
  expect_same_losses(dir / "one", dir / "four", 0, 20, "the run");
  if (!zero1) return;
  // ZeRO-1's moments, gathered over the replicas and then the stages, resume in one process.
  const std::string more = "train " + common + "--set train.micro_batch_size=4 --set train.max_steps=24 ";
  ASSERT_EQ(hwtrain(more + "--resume one", dir.path()), 0);
  ASSERT_EQ(hwtrain(more + "--resume four", dir.path(), "resume.log"), 0) << testing::read_text(dir / "resume.log");
  expect_same_losses(dir / "one", dir / "four", 20, 24, "resumed in one process");
}

// TP2 x PP2 on 4 ranks: the same losses as one process, and its checkpoint (whole tensors joined
// over both groups) resumes in one process with the single-process continuation.
TEST(ModelParallelRun, TensorTimesPipelineMatchesOneProcessAndResumesInOne) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string common = kCommon + "--set model.preset=llama-tiny --set train.micro_batch_size=2 "
                                       "--set train.grad_accum_steps=4 --set optimization.checkpoint_every=1 ";
  const std::string log = expect_split_run_matches_one_process(
      dir, common, 4, 29717, "--set dist.tensor_parallel=2 --set dist.pipeline_parallel=2");
  EXPECT_NE(log.find("1 data x 2 pipeline x 2 tensor"), std::string::npos);
}

// Interleaved 1F1B (dist.pipeline_chunks = 2: 2 stages of 2 chunks, GPT-2's tied head on the first
// and last): the losses of one process; its checkpoint resumes in one process. Chunks without a
// pipeline, or micro-batches that do not group by the stages, are one line naming the keys; "auto"
// runs the chunks the plan chose.
TEST(ModelParallelRun, InterleavedPipelineMatchesOneProcessAndResumesInOne) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string common = kCommon + "--set model.preset=tiny --set model.n_layer=4 --set train.micro_batch_size=2 "
                                       "--set train.grad_accum_steps=4 ";
  const std::string log = expect_split_run_matches_one_process(
      dir, common, 2, 29737, "--set dist.pipeline_parallel=2 --set dist.pipeline_chunks=2 --set train.eval_interval=10");
  EXPECT_NE(log.find("2 interleaved chunks per stage; this stage: blocks 0-0, 2-2"), std::string::npos) << log;

  EXPECT_NE(hwtrain("train " + common + "--set dist.pipeline_chunks=2 --out x", dir.path(), "alone.log"), 0);
  EXPECT_NE(testing::read_text(dir / "alone.log").find("dist.pipeline_chunks = 2 needs dist.pipeline_parallel > 1"),
            std::string::npos)
      << testing::read_text(dir / "alone.log");
  EXPECT_NE(hwtrain("launch --nproc-per-node 2 --master-port 29739 -- train " + common +
                        "--set train.grad_accum_steps=3 --set dist.pipeline_parallel=2 --set dist.pipeline_chunks=2 --out y",
                    dir.path(), "groups.log"),
            0);
  EXPECT_NE(testing::read_text(dir / "groups.log").find("train.grad_accum_steps = 3 must be a multiple of it"),
            std::string::npos)
      << testing::read_text(dir / "groups.log");
  EXPECT_NE(hwtrain("launch --nproc-per-node 2 --master-port 29741 -- train " + common +
                        "--set dist.pipeline_parallel=2 --set dist.pipeline_chunks=3 --out z",
                    dir.path(), "chunks.log"),
            0);
  EXPECT_NE(testing::read_text(dir / "chunks.log").find("= 6 model chunks is more than model.n_layer = 4"),
            std::string::npos)
      << testing::read_text(dir / "chunks.log");
  // auto: the plan's layout search chooses the chunks (Gloo's per-message cost keeps this CPU pair
  // plain), and the run cuts its stages as the plan says.
  ASSERT_EQ(hwtrain("launch --nproc-per-node 2 --master-port 29743 -- train " + common +
                        "--set train.max_steps=2 --set dist.pipeline_parallel=2 --set dist.pipeline_chunks=auto --out a",
                    dir.path(), "auto.log"),
            0)
      << testing::read_text(dir / "auto.log");
  const std::string chosen = testing::read_text(dir / "auto.log");
  const size_t line = chosen.find("pipeline_chunks           ");
  ASSERT_NE(line, std::string::npos) << chosen;
  const int64_t chunks = std::stoll(chosen.substr(line + 26, 2));
  EXPECT_NE(chosen.find("(the parallel layout's: "), std::string::npos) << chosen;
  EXPECT_EQ(chosen.find("interleaved chunks per stage") != std::string::npos, chunks > 1) << chosen;
}

// dist.tensor_parallel = dist.pipeline_parallel = auto on 2 ranks: a global batch of 3 sequences
// cannot be shared by two replicas, so the plan's layout search cuts the model (into a tensor or a
// pipeline pair, whichever it predicts faster) and the launch runs that mesh: the losses of one
// process, and a checkpoint that resumes in one.
TEST(ModelParallelRun, AutoLayoutRunsThePlansMeshWithTheLossesOfOneProcess) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string common = kCommon + "--set model.preset=llama-tiny --set train.micro_batch_size=1 "
                                       "--set optimization.target_batch_size=3 ";
  const std::string log = expect_split_run_matches_one_process(
      dir, common, 2, 29751, "--set dist.tensor_parallel=auto --set dist.pipeline_parallel=auto");
  EXPECT_TRUE(log.find("1 data x 1 pipeline x 2 tensor") != std::string::npos ||
              log.find("1 data x 2 pipeline x 1 tensor") != std::string::npos)
      << log;
  EXPECT_NE(log.find("global batch 3 is not a multiple of dp 2"), std::string::npos) << log;
}

INSTANTIATE_TEST_SUITE_P(Layouts, TwoReplicas, ::testing::Values("tensor", "pipeline", "pipeline_zero1"),
                         [](const auto& info) { return info.param; });

// ZeRO-2 and ZeRO-3 over the replicas of a split model, with accumulation and
// activation checkpointing: GPT-2's tied embedding on two stages (its copies' gradient shards
// summed over them) and Llama's sequence-parallel norms on a tensor pair (their shards summed over
// it) give the losses of one process over 20 steps. The checkpoint holds whole tensors (the fp32
// masters and moments gathered over the replicas, then joined over the model's groups): it resumes
// in one process with that process's continuation, and on the same mesh with the same.
struct ShardedReplicas : ::testing::TestWithParam<std::string> {};  // "<pipeline|tensor>_<zero2|zero3>"

TEST_P(ShardedReplicas, OfASplitModelMatchOneProcessAndResume) {
  const std::string param = GetParam(), sharding = param.substr(param.find('_') + 1);
  const bool pipeline = param.rfind("pipeline", 0) == 0;
  const int port = pipeline ? (sharding == "zero2" ? 29761 : 29820) : sharding == "zero2" ? 29765 : 29769;
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string common = kCommon + (pipeline ? "--set model.preset=tiny --set model.n_head=4 " : "--set model.preset=llama-tiny ") +
                             "--set optimization.checkpoint_every=1 ";
  const std::string one = "train " + common + "--set train.micro_batch_size=4 ";
  auto split = [&](int at) {
    return "launch --nproc-per-node 4 --master-port " + std::to_string(at) + " -- train " + common +
           "--set train.micro_batch_size=2 --set dist.sharding=" + sharding +
           (pipeline ? " --set dist.pipeline_parallel=2 " : " --set dist.tensor_parallel=2 ");
  };
  const std::string first = "--set train.max_steps=20 --set checkpoint.save_final=true ";
  ASSERT_EQ(hwtrain(one + first + "--out one", dir.path()), 0);
  ASSERT_EQ(hwtrain(split(port) + first + "--out four", dir.path(), "four.log"), 0) << testing::read_text(dir / "four.log");
  const std::string log = testing::read_text(dir / "four.log");
  EXPECT_NE(log.find(pipeline ? "2 data x 2 pipeline x 1 tensor" : "2 data x 1 pipeline x 2 tensor"), std::string::npos) << log;
  EXPECT_NE(log.find(sharding + ": "), std::string::npos) << log;  // the engine's line
  expect_same_losses(dir / "one", dir / "four", 0, 20, "the run");
  std::filesystem::copy(dir / "four", dir / "again", std::filesystem::copy_options::recursive);

  const std::string more = "--set train.max_steps=24 --set checkpoint.save_final=false ";
  ASSERT_EQ(hwtrain(one + more + "--resume one", dir.path()), 0);
  ASSERT_EQ(hwtrain(one + more + "--resume four", dir.path(), "resume.log"), 0) << testing::read_text(dir / "resume.log");
  expect_same_losses(dir / "one", dir / "four", 20, 24, "resumed in one process");
  ASSERT_EQ(hwtrain(split(port + 1) + more + "--resume again", dir.path(), "again.log"), 0)
      << testing::read_text(dir / "again.log");
  expect_same_losses(dir / "one", dir / "again", 20, 24, "resumed on the same mesh");
  if (!pipeline) {
    if (sharding == "zero3") return;
    // Uneven vocabulary rows would lay the norms' gradient shards out differently on the tensor ranks.
    EXPECT_NE(hwtrain(split(port + 2) + "--set model.vocab_size=321 --set train.max_steps=1 --out odd", dir.path(), "odd.log"), 0);
    EXPECT_NE(testing::read_text(dir / "odd.log").find("needs the vocabulary (model.vocab_size = 321) to divide by "
                                                       "dist.tensor_parallel = 2"),
              std::string::npos)
        << testing::read_text(dir / "odd.log");
    return;
  }
  // Each stage read its own blocks' weights of the whole checkpoint (the tiny GPT: 2 blocks of 12
  // parameters, 4 embedding and final-norm ones; the tied embedding on both stages).
  const std::string again = testing::read_text(dir / "again.log");
  EXPECT_NE(again.find("[rank 0] read the weights of 14 of the checkpoint's 28 parameters"), std::string::npos) << again;
  EXPECT_NE(again.find("[rank 1] read the weights of 15 of the checkpoint's 28 parameters"), std::string::npos) << again;
  // In bf16 a stage's weights are ZeRO-2's 16-bit copies: it takes the fp32 activations it receives
  // back in their dtype (the CPU layer norm refuses a mix).
  EXPECT_EQ(hwtrain(split(port + 3) + "--set optimization.mixed_precision_dtype=bf16 --set train.max_steps=2 --out bf16",
                    dir.path(), "bf16.log"),
            0)
      << testing::read_text(dir / "bf16.log");
}

INSTANTIATE_TEST_SUITE_P(Layouts, ShardedReplicas,
                         ::testing::Values("pipeline_zero2", "pipeline_zero3", "tensor_zero2", "tensor_zero3"),
                         [](const auto& info) { return info.param; });

// ZeRO-3 over the replicas of an interleaved pipeline that its micro-batches fill (m = p = 2: each
// stage runs all its forwards before its backwards): a unit is freed after one micro-batch's
// backward and gathered again for the next one's, also the units a stage keeps past their forward
// (the final norm and head, a tied embedding's copy). GPT-2 (tied) and Llama (untied) give the
// losses of one process.
TEST(ModelParallelRun, Zero3StagesOfAFilledInterleavedPipelineMatchOneProcess) {
  int port = 29824;
  for (const std::string model : {"--set model.preset=tiny --set model.n_head=4 ", "--set model.preset=llama-tiny "}) {
    testing::TempDir dir;
    dir.write("corpus/a.txt", testing::small_corpus());
    const std::string common = kCommon + model + "--set model.n_layer=4 --set optimization.checkpoint_every=1 " +
                               "--set train.max_steps=10 ";
    ASSERT_EQ(hwtrain("train " + common + "--set train.micro_batch_size=4 --out one", dir.path()), 0);
    ASSERT_EQ(hwtrain("launch --nproc-per-node 4 --master-port " + std::to_string(port++) + " -- train " + common +
                          "--set train.micro_batch_size=2 --set dist.sharding=zero3 --set dist.pipeline_parallel=2 "
                          "--set dist.pipeline_chunks=2 --out four",
                      dir.path(), "four.log"),
              0)
        << testing::read_text(dir / "four.log");
    const std::string log = testing::read_text(dir / "four.log");
    EXPECT_NE(log.find("2 interleaved chunks per stage"), std::string::npos) << log;
    EXPECT_NE(log.find("zero3: "), std::string::npos) << log;
    expect_same_losses(dir / "one", dir / "four", 0, 10, model + "the run");
  }
}

TEST(ModelParallelRun, AMeshThatDoesNotFitIsOneLineNamingTheKey) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  EXPECT_NE(hwtrain("train " + kCommon + "--set model.preset=tiny --set dist.tensor_parallel=2 --out x", dir.path(),
                "world.log"),
            0);
  const std::string world = testing::read_text(dir / "world.log");
  EXPECT_NE(world.find("dist.tensor_parallel = 2 x dist.pipeline_parallel = 1 = 2 does not divide the world size 1"),
            std::string::npos)
      << world;
  EXPECT_NE(hwtrain("launch --nproc-per-node 2 --master-port 29707 -- train " + kCommon +
                    "--set model.preset=llama-tiny --set model.n_kv_head=1 --set dist.tensor_parallel=2 --out y",
                dir.path(), "kv.log"),
            0);
  EXPECT_NE(testing::read_text(dir / "kv.log").find("does not divide model.n_kv_head = 1"), std::string::npos)
      << testing::read_text(dir / "kv.log");
  EXPECT_NE(hwtrain("launch --nproc-per-node 4 --master-port 29709 -- train " + kCommon +
                        "--set model.preset=tiny --set dist.pipeline_parallel=4 --out z",
                    dir.path(), "pp.log"),
            0);
  EXPECT_NE(testing::read_text(dir / "pp.log").find("dist.pipeline_parallel = 4 is more stages than model.n_layer = 2"),
            std::string::npos)
      << testing::read_text(dir / "pp.log");
  // A tensor size left to a search that chooses no layout (a setting that needs the whole model on
  // every rank): refused, not run as pure data parallel.
  EXPECT_NE(hwtrain("launch --nproc-per-node 2 --master-port 29711 -- train " + kCommon +
                        "--set model.preset=tiny --set dist.tensor_parallel=2 --set dist.pipeline_parallel=auto "
                        "--set optimization.auto_batch_size=true --out w",
                    dir.path(), "auto.log"),
            0);
  EXPECT_NE(testing::read_text(dir / "auto.log")
                .find("dist.tensor_parallel = 2 splits the model, but the layout search (dist.pipeline_parallel = "
                      "auto) chose none: optimization.auto_batch_size needs the whole model"),
            std::string::npos)
      << testing::read_text(dir / "auto.log");
}

}  // namespace
}  // namespace hwt
