// ZeRO-2/3 for the Trainer: dist/sharded_parameters.h over the model's parameter units
// (model/parameter_units.h), its hooks installed in the model, and the OptimizerSharding the
// Trainer runs with (Trainer::set_optimizer_sharding): an AdamW over this rank's segments, holding
// the trainer's optimizer state cut to them (a resumed run continues exactly), the global gradient
// norm, and sharded checkpoints (train/sharded_checkpoint.h), which resume on any world size and
// with any sharding. A model split over ranks (tensor or pipeline parallel: `group` is then its data-
// parallel group) shards its own rank's weights; its gradient norm also spans the model's groups
// and its checkpoints stay whole (OptimizerSharding::gather and master_weights). Parameters compute in the plan's precision (bf16 or fp16 copies of the fp32
// masters, as FSDP2's param_dtype; fp32 otherwise); gradients are reduced in fp32; fp16's loss
// scaler agrees on inf/NaN over the ranks.
#pragma once
#include <memory>

#include "hwtrain/dist/process_group.h"
#include "hwtrain/dist/sharded_parameters.h"
#include "hwtrain/model/trainable_model.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/train/adamw.h"
#include "hwtrain/train/training_checkpoint.h"
#include "hwtrain/train/update_placement.h"

namespace hwt {

struct ShardedTraining {
  std::shared_ptr<ShardedParameters> engine;  // also the trainer's GradientSync
  OptimizerSharding sharding;
};

// `whole`: the trainer's optimizer over the whole parameters (its options are taken, and its state
// when it has one). `resumed` (Trainer::take_resumed_state): a checkpoint's whole optimizer state
// not loaded into `whole`, cut to the shards instead, so that a resumed rank never holds a second
// whole copy of the moments; or a sharded checkpoint, from whose files each rank reads only its
// own segments of the fp32 master weights and of the AdamW state (its own shard file when the world
// size is the checkpoint's), then ZeRO-2 gathers the parameters and ZeRO-3 frees them. The ranks
// agree on whether every one read its part: a rank's IoError (a damaged shard) stops them all.
// `reduce`: the dtype gradients are reduce-scattered in (Plan::gradient_reduce). Collective: every
// rank calls it with the same model.
ShardedTraining shard_training(TrainableModel& model, const AdamW& whole, const std::shared_ptr<ProcessGroup>& group,
                               ShardStage stage, Precision precision, ResumedState resumed = {},
                               ReduceDtype reduce = ReduceDtype::Fp32);

}  // namespace hwt
