// `hwtrain train --init-from DIR`: a Hugging Face Llama directory (written by transformers, in
// shards) starts the run with its shape and weights; the run then trains and checkpoints as any.
// Model keys that contradict config.json, and --resume beside it, are refused by name; `hwtrain
// export --format hf` writes the checkpoint back out as such a directory.
#include <gtest/gtest.h>

#include <cstdlib>

#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/interop/hf_directory.h"
#include "hwtrain/io/safetensors.h"
#include "hwtrain/train/training_data.h"
#include "interop/reference_dir.h"
#include "support/run_metrics.h"
#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

std::string first_step_loss(const std::string& log) {
  const auto at = log.find("step 1 | loss ");
  return at == std::string::npos ? std::string() : log.substr(at + 14, 6);
}

TEST(InitFrom, HuggingFaceDirectoryStartsTheRun) {
  if (testing::hf_reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no transformers";
  const fs::path hf = fs::path(testing::hf_reference_dir()) / "llama_gqa_rope3_hf";
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string common = std::string(HWTRAIN_BINARY) +
                             " train --data corpus --set data.document_separator=% --set data.cache_dir=cache "
                             "--set train.max_steps=2 --set train.eval_interval=0 --set train.sample_tokens=0 "
                             "--set train.log_interval=1 --set log.report=false --set log.tensorboard=false "
                             "--set model.block_size=32 --set train.micro_batch_size=2 --set train.time_budget=0 "
                             "--set optimization.mixed_precision_dtype=fp32 --set optimization.intra_op_threads=1 ";
  const std::string cd = "cd '" + dir.path().string() + "' && ";
  ASSERT_EQ(testing::run_shell(cd + common + "--init-from '" + hf.string() + "' --out imported > imported.log 2>&1"), 0)
      << testing::read_text(dir / "imported.log");
  const std::string imported = testing::read_text(dir / "imported.log");
  EXPECT_NE(imported.find("weights: " + hf.string()), std::string::npos) << imported;
  // The same shape from scratch starts elsewhere: the imported weights were used.
  ASSERT_EQ(testing::run_shell(cd + common +
                               "--set model.architecture=llama --set model.n_layer=2 --set model.n_head=4 "
                               "--set model.n_kv_head=2 --set model.n_embd=64 --set model.intermediate_size=160 "
                               "--set model.vocab_size=320 --set model.rope_theta=500000 --out scratch > scratch.log 2>&1"),
            0);
  const std::string a = first_step_loss(imported), b = first_step_loss(testing::read_text(dir / "scratch.log"));
  ASSERT_FALSE(a.empty());
  EXPECT_NE(a, b);
  const SafetensorsFile ckpt = load_safetensors(dir / "imported" / "checkpoints" / "step_00000002" / "model.safetensors");
  EXPECT_TRUE(ckpt.contains("layers.1.self_attn.k_proj.weight"));
  // ... and goes back out as a Hugging Face directory holding the checkpoint's weights.
  ASSERT_EQ(testing::run_shell(cd + HWTRAIN_BINARY + " export imported --format hf -o exported --max-shard-size 60000 "
                               "> export.log 2>&1"),
            0)
      << testing::read_text(dir / "export.log");
  const auto exported = read_hf_weights(dir / "exported");
  EXPECT_EQ(exported.size(), ckpt.tensors.size());
  for (const auto& [hf_name, t] : exported) {
    const std::string name = hf_name == "lm_head.weight" ? hf_name : hf_name.substr(6);
    EXPECT_TRUE(torch::equal(t, ckpt.get(name))) << hf_name;
  }
  EXPECT_NE(testing::run_shell(cd + HWTRAIN_BINARY + " export imported --format onnx -o other > bad0.log 2>&1"), 0);
  EXPECT_NE(testing::read_text(dir / "bad0.log").find("--format onnx is unknown"), std::string::npos);

  EXPECT_NE(testing::run_shell(cd + common + "--init-from '" + hf.string() +
                               "' --set model.n_layer=3 --out bad > bad.log 2>&1"),
            0);
  EXPECT_NE(testing::read_text(dir / "bad.log").find("drop model.n_layer"), std::string::npos);
  EXPECT_NE(testing::run_shell(cd + common + "--init-from '" + hf.string() + "' --resume imported > bad2.log 2>&1"), 0);
  EXPECT_NE(testing::read_text(dir / "bad2.log").find("--init-from starts a run"), std::string::npos)
      << testing::read_text(dir / "bad2.log");
}

// A model directory with a tokenizer of its own: the run tokenizes its text with it (the imported
// embeddings are indexed by its ids), and a dataset prepared with another tokenizer is refused;
// naming data.tokenizer overrides it.
TEST(InitFrom, TheDirectorysTokenizerTokenizesTheData) {
  if (testing::hf_reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no transformers";
  testing::TempDir dir;
  fs::copy(fs::path(testing::hf_reference_dir()) / "llama_gqa_rope3_hf", dir / "hf", fs::copy_options::recursive);
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string cd = "cd '" + dir.path().string() + "' && " + HWTRAIN_BINARY;
  ASSERT_EQ(testing::run_shell(cd + " tokenizer train -i corpus -o hf --vocab-size 300 --separator % > tok.log 2>&1"),
            0)
      << testing::read_text(dir / "tok.log");
  const std::string run = " train --init-from hf --set train.max_steps=1 --set train.eval_interval=0 "
                          "--set train.sample_tokens=0 --set log.report=false --set log.tensorboard=false "
                          "--set model.block_size=32 --set train.micro_batch_size=2 --set train.time_budget=0 "
                          "--set optimization.mixed_precision_dtype=fp32 --set checkpoint.save_final=false "
                          "--set data.document_separator=% --set data.cache_dir=cache ";
  ASSERT_EQ(testing::run_shell(cd + run + "--data corpus --out own > own.log 2>&1"), 0)
      << testing::read_text(dir / "own.log");
  EXPECT_NE(testing::read_text(dir / "own" / "config.toml").find("tokenizer = \"hf\""), std::string::npos)
      << testing::read_text(dir / "own" / "config.toml");
  ASSERT_EQ(testing::run_shell(cd + " prepare corpus -o bytes.hwt --separator % > prepare.log 2>&1"), 0);
  EXPECT_NE(testing::run_shell(cd + run + "--data bytes.hwt --out mixed > mixed.log 2>&1"), 0);
  EXPECT_NE(testing::read_text(dir / "mixed.log").find("was prepared with tokenizer"), std::string::npos)
      << testing::read_text(dir / "mixed.log");
  EXPECT_EQ(testing::run_shell(cd + run + "--data bytes.hwt --set data.tokenizer=byte --out bytes > bytes.log 2>&1"), 0)
      << testing::read_text(dir / "bytes.log");
}

// A fine-tune continues from the imported model: its first step's loss (before any update) is
// transformers' loss on the same batch. The batch is drawn again here through hwtrain's own loader
// (the prepared dataset, the run's seed and batch size), transformers computes the logits of the
// directory on it, and the cross-entropy of those logits is compared with metrics.jsonl's step 1.
TEST(InitFrom, FirstStepLossIsTransformersLossOnTheSameBatch) {
  if (testing::hf_reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no transformers";
  const fs::path hf = fs::path(testing::hf_reference_dir()) / "llama_gqa_rope3_hf";
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string cd = "cd '" + dir.path().string() + "' && ";
  ASSERT_EQ(testing::run_shell(cd + HWTRAIN_BINARY + " prepare corpus -o data.hwt --separator % "
                               "> prepare.log 2>&1"),
            0)
      << testing::read_text(dir / "prepare.log");
  ASSERT_EQ(testing::run_shell(cd + HWTRAIN_BINARY + " train --data data.hwt --init-from '" + hf.string() +
                               "' --set train.max_steps=1 --set train.eval_interval=0 --set train.sample_tokens=0 "
                               "--set train.log_interval=1 --set log.report=false --set log.tensorboard=false "
                               "--set model.block_size=32 --set train.micro_batch_size=4 --set train.grad_accum_steps=1 "
                               "--set train.seed=7 --set train.time_budget=0 --set optimization.mixed_precision_dtype=fp32 "
                               "--set checkpoint.save_final=false --out run > run.log 2>&1"),
            0)
      << testing::read_text(dir / "run.log");
  const std::vector<double> losses = testing::step_losses(dir / "run" / "metrics.jsonl");
  ASSERT_EQ(losses.size(), 1u);

  auto data = std::make_shared<const ShardedDataset>(dir / "data.hwt");
  LoaderOptions lo;
  lo.batch_size = 4;
  lo.seed = 7;
  lo.num_workers = 0;
  const LoadedBatch batch = TokenWindows(data, 32, 0).train_loader(lo)->next();
  save_safetensors(dir / "ids.safetensors", {{"ids", batch.x_NT}});
  const std::string cmd = std::string(HWTRAIN_PYTHON) + " " + HWTRAIN_SOURCE_DIR +
                          "/tests/interop/reference/hf_load_and_run.py '" + hf.string() + "' '" +
                          (dir / "ids.safetensors").string() + "' '" + (dir / "logits.safetensors").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const torch::Tensor logits = load_safetensors(dir / "logits.safetensors").get("logits");
  const double theirs =
      torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), batch.y_NT.reshape({-1})).item<double>();
  EXPECT_NEAR(losses[0], theirs, 1e-5) << "hwtrain's first step against transformers on the same batch";
}

}  // namespace
}  // namespace hwt
