// TrainerOptions: what the Trainer needs beyond the Plan, which holds every hardware decision. The
// schedule and AdamW's hyperparameters ([train]), where checkpoints go ([checkpoint]), how training
// windows are drawn and which tokenizer checkpoints carry ([data]), the auto batch probe's bound,
// and the resolved config text that every checkpoint stores so a run can be resumed. The Trainer
// and its callbacks read these and the Plan, never the RunConfig (run/run_bindings.h's
// trainer_options() is the one place that reads it for them).
#pragma once
#include <cstdint>
#include <string>

#include "hwtrain/data/batch_loader.h"
#include "hwtrain/io/checkpoint_config.h"
#include "hwtrain/train/train_config.h"

namespace hwt {

struct TrainerOptions {
  TrainConfig train;                            // schedule, steps, evaluation, AdamW, clipping, seed
  CheckpointConfig checkpoint;                  // directory and how many to keep
  SamplingMode sampling = SamplingMode::kRandom;  // data.sampling
  std::string tokenizer;                        // data.tokenizer: what checkpoints carry
  int64_t max_batch_size = 64;                  // optimization.max_batch_size: the probe's largest micro-batch
  std::string config_toml;                      // the resolved run config, saved with every checkpoint
};

}  // namespace hwt
