// Decoding and evaluating with the model split, end to end through `hwtrain launch` (Gloo, fp32,
// tiny models): the sample a tensor- or pipeline-parallel run prints at its end is decoded on its
// ranks, never joined, and is the text one process generates from its checkpoint; `generate` and
// `eval` launched on several ranks split the checkpoint (tensor parallel, or --pipeline stages of
// tensor-parallel ranks) and print one process's text and validation loss, once; several samples
// decode as micro-batches in flight over the stages.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"
#include "cli/model_parallel_args.h"

namespace hwt {
namespace split_decoding_cli {

const std::string kCommon = testing::kModelParallelRun;

int hwtrain(const std::string& args, const std::filesystem::path& cwd, const std::string& log = "/dev/null") {
  return testing::hwtrain_in(cwd, args, log);
}

// What `hwtrain generate` prints from `ckpt` in one process (the first line), with the sampling the
// split runs below use.
std::string one_process_text(const testing::TempDir& dir, const std::string& ckpt) {
  EXPECT_EQ(testing::run_shell("cd '" + dir.path().string() + "' && " + HWTRAIN_BINARY + " generate " + ckpt +
                               " --prompt the --tokens 12 --temperature 0.8 --top-k 40 --seed 7 > " + ckpt +
                               ".txt 2> " + ckpt + ".err"),
            0)
      << testing::read_text(dir / (ckpt + ".err"));
  const std::string text = testing::read_text(dir / (ckpt + ".txt"));
  return text.substr(0, text.find('\n'));
}

const std::string kSampling = "--set train.sample_prompt=the --set train.sample_temperature=0.8 "
                              "--set train.sample_top_k=40 --set train.seed=7 ";

// Rank 0 alone printed `text` as its sample; `log`: the run's.
void expect_rank0_sample(const std::string& log, const std::string& text) {
  const std::string head = "sample:\n[rank 0] ";
  const size_t at = log.find(head);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.substr(at + head.size(), text.size()), text) << log;
  EXPECT_EQ(log.find("[rank 1] sample:"), std::string::npos) << log;
}

// The sample a TP2 run prints at its end is decoded with the model split (no rank joins it): the
// text `hwtrain generate` gives from its final checkpoint in one process with the same prompt, seed
// and sampling. And `generate` launched on 2 ranks decodes with the model split over them: the
// same text, printed by rank 0 alone.
TEST(ModelParallelRun, ASplitRunSamplesWithTheModelSplit) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  ASSERT_EQ(hwtrain("launch --nproc-per-node 2 --master-port 29753 -- train " + kCommon +
                        "--set model.preset=llama-tiny --set train.max_steps=4 --set checkpoint.save_final=true "
                        "--set train.sample_tokens=12 --set dist.tensor_parallel=2 " + kSampling + "--out tp",
                    dir.path(), "tp.log"),
            0)
      << testing::read_text(dir / "tp.log");
  const std::string text = one_process_text(dir, "tp");
  ASSERT_FALSE(text.empty());
  expect_rank0_sample(testing::read_text(dir / "tp.log"), text);

  ASSERT_EQ(hwtrain("launch --nproc-per-node 2 --master-port 29830 -- generate tp --prompt the --tokens 12 "
                    "--temperature 0.8 --top-k 40 --seed 7",
                    dir.path(), "split.txt"),
            0)
      << testing::read_text(dir / "split.txt");
  const std::string split = testing::read_text(dir / "split.txt");
  EXPECT_NE(split.find("[rank 0] " + text), std::string::npos) << split;
  EXPECT_NE(split.find("split over 2 ranks"), std::string::npos) << split;
  EXPECT_EQ(split.find("[rank 1] " + text), std::string::npos) << split;
}

// `generate --samples 3 --pipeline 2` on 2 ranks decodes the 3 continuations as 2 micro-batches in
// flight (one per stage, the default) and prints, on rank 0 alone, what one process prints with
// --micro-batches 2; --micro-batches beyond the samples and --samples 0 are refused naming them.
void expect_micro_batched_samples(const testing::TempDir& dir) {
  const std::string args = " --prompt the --tokens 12 --temperature 0.8 --top-k 40 --seed 7 --samples 3";
  ASSERT_EQ(testing::run_shell("cd '" + dir.path().string() + "' && " + HWTRAIN_BINARY + " generate pp" + args +
                               " --micro-batches 2 > samples.txt 2> samples.err"),
            0)
      << testing::read_text(dir / "samples.err");
  ASSERT_EQ(hwtrain("launch --nproc-per-node 2 --master-port 29841 -- generate pp --pipeline 2" + args, dir.path(),
                    "samples-split.txt"),
            0)
      << testing::read_text(dir / "samples-split.txt");
  const std::string one = testing::read_text(dir / "samples.txt"), split = testing::read_text(dir / "samples-split.txt");
  EXPECT_NE(one.find("=== sample 3 of 3 ==="), std::string::npos) << one;
  size_t lines = 0;
  for (size_t at = 0, end; at < one.size(); at = end + 1) {
    end = one.find('\n', at);
    if (end == std::string::npos) end = one.size();
    const std::string line = one.substr(at, end - at);
    if (line.empty()) continue;
    ++lines;
    EXPECT_NE(split.find("[rank 0] " + line), std::string::npos) << "missing: " << line << "\n" << split;
  }
  EXPECT_GE(lines, 6u) << one;
  EXPECT_NE(split.find("2 micro-batches"), std::string::npos) << split;
  EXPECT_EQ(split.find("[rank 1] === sample"), std::string::npos) << split;
  const std::string bad = "cd '" + dir.path().string() + "' && " + HWTRAIN_BINARY + " generate pp --samples ";
  EXPECT_NE(testing::run_shell(bad + "3 --micro-batches 4 > bad-mb.txt 2>&1"), 0);
  EXPECT_NE(testing::read_text(dir / "bad-mb.txt").find("--micro-batches 4 is out of range for --samples 3"),
            std::string::npos)
      << testing::read_text(dir / "bad-mb.txt");
  EXPECT_NE(testing::run_shell(bad + "0 > bad-s.txt 2>&1"), 0);
  EXPECT_NE(testing::read_text(dir / "bad-s.txt").find("--samples 0 is out of range"), std::string::npos)
      << testing::read_text(dir / "bad-s.txt");
}

// The same over pipeline stages: 2 replicas of 2 GPT-2 stages under ZeRO-3 (the tied embedding on
// the first and last stage) sample what one process generates from their checkpoint, and so does
// `generate --pipeline 2` on 4 ranks (2 stages of 2 tensor ranks); `eval` split over 4 ranks in 2
// stages and over 2 tensor ranks gives one process's validation loss; --pipeline that does not
// divide the ranks is refused naming it.
TEST(ModelParallelRun, APipelineRunSamplesAcrossItsStages) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  ASSERT_EQ(hwtrain("launch --nproc-per-node 4 --master-port 29831 -- train " + kCommon +
                        "--set model.preset=tiny --set model.n_head=4 --set train.max_steps=4 "
                        "--set checkpoint.save_final=true --set train.sample_tokens=12 --set dist.pipeline_parallel=2 "
                        "--set dist.sharding=zero3 " + kSampling + "--out pp",
                    dir.path(), "pp.log"),
            0)
      << testing::read_text(dir / "pp.log");
  const std::string log = testing::read_text(dir / "pp.log");
  ASSERT_NE(log.find("2 data x 2 pipeline x 1 tensor"), std::string::npos) << log;
  EXPECT_NE(log.find("[rank 0] sample: decoded with the model split (2 data x 2 pipeline x 1 tensor)"), std::string::npos)
      << log;
  const std::string text = one_process_text(dir, "pp");
  ASSERT_FALSE(text.empty());
  expect_rank0_sample(log, text);

  ASSERT_EQ(hwtrain("launch --nproc-per-node 4 --master-port 29832 -- generate pp --prompt the --tokens 12 "
                    "--temperature 0.8 --top-k 40 --seed 7 --pipeline 2",
                    dir.path(), "split.txt"),
            0)
      << testing::read_text(dir / "split.txt");
  const std::string split = testing::read_text(dir / "split.txt");
  EXPECT_NE(split.find("[rank 0] " + text), std::string::npos) << split;
  EXPECT_NE(split.find("split over 4 ranks in 2 pipeline stages"), std::string::npos) << split;
  expect_micro_batched_samples(dir);

  // eval split the same ways gives one process's validation loss, printed once (to 6 significant
  // digits: one unit of the last is 1e-5 here, so 2e-5 allows the rounding of both prints).
  const std::string eval = "eval pp --data corpus --set data.document_separator=% --set data.cache_dir=cache --batches 3";
  auto val_loss = [&](const std::string& launch, const std::string& log, const std::string& layout = "") {
    EXPECT_EQ(hwtrain(launch + eval + layout, dir.path(), log), 0) << testing::read_text(dir / log);
    const std::string text = testing::read_text(dir / log);
    const size_t at = text.find("val_loss ");
    EXPECT_EQ(text.find("val_loss ", at + 1), std::string::npos) << "printed by rank 0 alone: " << text;
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + 9));
  };
  const double whole = val_loss("", "eval.txt");
  ASSERT_GT(whole, 0);
  EXPECT_NEAR(val_loss("launch --nproc-per-node 4 --master-port 29835 -- ", "eval4.txt", " --pipeline 2"), whole, 2e-5);
  EXPECT_NE(testing::read_text(dir / "eval4.txt").find("split over 4 ranks"), std::string::npos);
  EXPECT_NEAR(val_loss("launch --nproc-per-node 2 --master-port 29836 -- ", "eval2.txt"), whole, 2e-5);

  EXPECT_NE(hwtrain("launch --nproc-per-node 2 --master-port 29833 -- generate pp --pipeline 3", dir.path(), "bad.txt"), 0);
  EXPECT_NE(testing::read_text(dir / "bad.txt").find("--pipeline 3 on 2 ranks: the stages must divide the ranks"),
            std::string::npos)
      << testing::read_text(dir / "bad.txt");
}

}  // namespace split_decoding_cli
}  // namespace hwt
