// train_model (issue 22): the seeds' names mapped onto hwtrain's settings (an explicit key wins),
// a user's module trained for whole epochs with the history returned, and the built-in decoder on
// text files with a tokenizer; bad values named.
#include <gtest/gtest.h>

#include <fstream>

#include "hwtrain/core/error.h"
#include "hwtrain/run/train_model.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

struct TinyMlpImpl : torch::nn::Module {
  TinyMlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TinyMlp);

std::shared_ptr<ExampleSource> line_examples(int64_t n, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto x = torch::randn({n, 4}, gen);
  return std::make_shared<TensorExamples>(x, x.sum(1, true));
}

TEST(TrainModel, SeedNamesSetTheirKeysUnlessAKeyIsSetExplicitly) {
  TrainModelOptions o;
  o.use_amp = false;
  o.num_workers = 0;
  o.pin_memory = false;
  o.batch_size = 48;
  RunConfig c = seed_settings(o);
  EXPECT_EQ(c.optimization.mixed_precision_dtype, Precision::Fp32);
  EXPECT_EQ(c.optimization.num_workers, 0);
  EXPECT_FALSE(c.optimization.pin_memory);
  EXPECT_EQ(c.optimization.target_batch_size, 48);

  o.config.apply_override("optimization.num_workers=2");
  o.config.apply_override("optimization.mixed_precision_dtype=bf16");
  c = seed_settings(o);
  EXPECT_EQ(c.optimization.num_workers, 2);
  EXPECT_EQ(c.optimization.mixed_precision_dtype, Precision::Bf16);
}

TEST(TrainModel, BadSeedValuesAreNamed) {
  TrainModelOptions o;
  o.epochs = 0;
  EXPECT_THROW(
      try { seed_settings(o); } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("epochs = 0"), std::string::npos) << e.what();
        throw;
      },
      ConfigError);
  o.epochs = 1;
  o.batch_size = 0;
  EXPECT_THROW(seed_settings(o), ConfigError);
  // Two batch sizes that disagree: no silent winner.
  o.batch_size = 32;
  o.config.apply_override("optimization.target_batch_size=64");
  try {
    seed_settings(o);
    FAIL() << "batch_size 32 against target_batch_size 64 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("batch_size = 32 and the config's optimization.target_batch_size = 64"),
              std::string::npos) << e.what();
  }
  o.config.apply_override("optimization.target_batch_size=32");
  EXPECT_EQ(seed_settings(o).optimization.target_batch_size, 32);
}

TrainModelOptions three_epochs_of_32(const std::filesystem::path& run_dir) {
  TrainModelOptions o;
  o.epochs = 3;
  o.batch_size = 32;
  o.num_workers = 0;
  o.run_dir = run_dir;
  return o;
}

TEST(TrainModel, TrainsAUserModuleForWholeEpochsAndReturnsTheHistory) {
  testing::TempDir dir;
  TrainModelOptions o = three_epochs_of_32(dir / "run");
  o.config.apply_override("train.lr=0.01");
  o.config.apply_override("train.eval_interval=4");
  o.config.apply_override("train.eval_batches=2");
  o.config.apply_override("train.warmup_steps=1");
  torch::manual_seed(0);
  TrainHistory h = train_model(make_module_model(TinyMlp(), torch::mse_loss), line_examples(256, 1), line_examples(64, 2), o);
  EXPECT_EQ(h.step_losses.size(), 3u * 8u);  // 256 rows / 32 per step, 3 epochs
  ASSERT_EQ(h.epoch_losses.size(), 3u);
  EXPECT_LT(h.epoch_losses[2], h.epoch_losses[0]);
  EXPECT_FALSE(h.val_losses.empty());
  EXPECT_EQ(h.result.steps, 24);
  ASSERT_TRUE(h.result.last_checkpoint.has_value());
  EXPECT_TRUE(std::filesystem::exists(*h.result.last_checkpoint / "model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir / "run" / "metrics.jsonl"));  // the command's sinks too
}

// The config's callbacks apply as in a command-line run: early stopping ends the run, by name.
TEST(TrainModel, TheConfigsEarlyStoppingStopsTheRun) {
  testing::TempDir dir;
  TrainModelOptions o = three_epochs_of_32(dir / "run");
  for (const char* key : {"early_stopping.enabled=true", "early_stopping.monitor=loss", "early_stopping.patience=1",
                          "early_stopping.min_delta=100", "train.eval_interval=0"}) {
    o.config.apply_override(key);
  }
  torch::manual_seed(0);
  TrainHistory h =
      train_model(make_module_model(TinyMlp(), torch::mse_loss), line_examples(256, 1), line_examples(64, 2), o);
  EXPECT_EQ(h.result.steps, 2);  // the first loss is the best; the second does not beat it by 100
  EXPECT_NE(h.result.stop_reason.find("early stopping"), std::string::npos) << h.result.stop_reason;
}

TEST(TrainModel, AMemoryDescriptionPicksTheLargestMicroBatchThatFits) {
  ModelMemoryDescription memory;
  memory.activation_bytes_per_row_fp32 = 1000;
  memory.activation_bytes_per_row_16bit = 500;
  Plan plan;
  plan.memory_budget_bytes = 16.0 * 100 + 4500;  // 100 parameters (16 bytes each) + 4.5 rows of fp32
  EXPECT_EQ(described_micro_batch(memory, 100, plan, 16, 64), 4);  // divisors of 16: 1 2 4 8 16
  plan.precision = Precision::Bf16;
  EXPECT_EQ(described_micro_batch(memory, 100, plan, 16, 64), 8);
  EXPECT_EQ(described_micro_batch(memory, 100, plan, 16, 4), 4);  // max_batch_size bounds it
  plan.memory_budget_bytes = 10;
  EXPECT_EQ(described_micro_batch(memory, 100, plan, 16, 64), 1);  // nothing fits: 1
}

TEST(TrainModel, TrainsTheBuiltInDecoderOnTextFiles) {
  testing::TempDir dir;
  for (const char* name : {"a.txt", "b.txt"}) {
    std::ofstream f(dir / name);
    for (int i = 0; i < 300; ++i) f << "line " << i << " of " << name << ": the quick brown fox jumps.\n";
  }
  ModelConfig m;
  m.n_layer = 1;
  m.n_head = 2;
  m.n_embd = 32;
  m.block_size = 32;
  TrainModelOptions o;
  o.epochs = 0.25;
  o.batch_size = 8;
  o.num_workers = 0;
  o.run_dir = dir / "run";
  o.config.apply_override("data.cache_dir=" + (dir / "cache").string());
  o.config.apply_override("train.eval_interval=0");
  o.config.apply_override("train.sample_tokens=0");
  TrainHistory h = train_model(m, "byte", {dir / "a.txt", dir / "b.txt"}, o);
  EXPECT_GT(h.result.steps, 0);
  EXPECT_EQ(h.step_losses.size(), static_cast<size_t>(h.result.steps));
  for (double l : h.step_losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(h.step_losses.back(), h.step_losses.front());
}

}  // namespace
}  // namespace hwt
