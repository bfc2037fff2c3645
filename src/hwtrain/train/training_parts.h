// make_training_parts: the parts a Trainer runs, built from the Plan and the trainer's options in
// one place — AdamW (fused or not, as planned) over the model's decay split, the precision state
// with its loss scaler, the training batch loader (this rank's rows, the planned workers, prefetch
// and pinning), and the tokenizer that checkpoints carry. The Trainer then only runs them.
#pragma once
#include <memory>

#include "hwtrain/data/batch_loader.h"
#include "hwtrain/data/tokenizer.h"
#include "hwtrain/model/trainable_model.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/train/adamw.h"
#include "hwtrain/train/mixed_precision.h"
#include "hwtrain/train/trainer_options.h"
#include "hwtrain/train/training_data.h"

namespace hwt {

struct TrainingParts {
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<MixedPrecision> precision;
  std::unique_ptr<BatchLoader> train_loader;  // the rows of each step for this rank, prefetched
  std::unique_ptr<Tokenizer> tokenizer;       // null for data without one
};

TrainingParts make_training_parts(const Plan& plan, const TrainerOptions& options, TrainableModel& model,
                                  const TrainingData& data, int rank, int world_size);

}  // namespace hwt
