// A Trainer on a tiny model and a synthetic token file, for the trainer's tests.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/token_file.h"
#include "hwtrain/train/trainer.h"
#include "support/temp_dir.h"

namespace hwt {

// The parts of a run's config the trainer's tests set (the RunConfig itself lives above train, in
// run/), and the TrainerOptions the run area would read from them.
struct TrainerTestConfig {
  ModelConfig model;
  TrainConfig train;
  CheckpointConfig checkpoint;
};

inline TrainerOptions trainer_options(const TrainerTestConfig& c) {
  TrainerOptions o;
  o.train = c.train;
  o.checkpoint = c.checkpoint;
  o.config_toml = "# a trainer test's run\n";
  o.tokenizer = "byte";  // data.tokenizer's default
  return o;
}

struct TrainerFixture {
  testing::TempDir dir;
  std::shared_ptr<const ShardedDataset> data;
  TrainerTestConfig config;
  Plan plan;

  TrainerFixture() {
    std::vector<int32_t> train, val;
    for (int i = 0; i < 4000; ++i) train.push_back((i * 7 + i / 13) % 64);
    for (int i = 0; i < 400; ++i) val.push_back((i * 5) % 64);
    write_token_file(dir / "d.hwt", 64, "byte", 1, train, val);
    data = std::make_shared<const ShardedDataset>(dir / "d.hwt");
    config.model.n_layer = 2;
    config.model.n_head = 2;
    config.model.n_embd = 32;
    config.model.block_size = 16;
    config.model.vocab_size = 64;
    config.model.dropout = 0.1;  // exercises the RNG state in checkpoints
    config.train.max_steps = 6;
    config.train.warmup_steps = 2;
    config.train.eval_interval = 0;
    config.train.eval_batches = 2;
    config.train.lr = 1e-2;
    config.checkpoint.keep_last = 5;
    plan.micro_batch_size = 4;
    plan.grad_accum_steps = 2;
  }

  std::unique_ptr<Trainer> make(const std::string& run) {
    torch::manual_seed(config.train.seed);
    GPT model(config.model, config.model.vocab_size);
    return std::make_unique<Trainer>(trainer_options(config), plan, model, data, dir / run);
  }
};

}  // namespace hwt
