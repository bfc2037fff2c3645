#include "hwtrain/train/training_parts.h"

#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace {

std::unique_ptr<AdamW> make_adamw(const Plan& plan, const TrainConfig& train, TrainableModel& model) {
  NamedParameters named_decay, named_no_decay;
  model.named_decay_and_no_decay(named_decay, named_no_decay);
  AdamWOptions opt;
  opt.beta1 = train.beta1;
  opt.beta2 = train.beta2;
  opt.eps = train.eps;
  opt.weight_decay = train.weight_decay;
  opt.fused = plan.fused_optimizer;
  opt.int8_moments = plan.optimizer_state_dtype == StateDtype::Int8;
  // Every sharded plan: ZeRO-1's moments are made for what this rank owns once it is told
  // (AdamW::set_owned), not whole first (the peak of the unsharded layout at start-up).
  opt.defer_state = plan.sharding != Sharding::None;
  opt.host_state = plan.optimizer_state_device == StateDevice::Host;
  return std::make_unique<AdamW>(named_decay, named_no_decay, opt);
}

// Every rank draws the same global batch of each step and keeps its rows (see batch_loader.h);
// rows per rank stay fixed through OOM retries (micro-batch halves, accumulation doubles).
std::unique_ptr<BatchLoader> make_train_loader(const Plan& plan, const TrainerOptions& options,
                                               const TrainingData& data, int rank, int world_size) {
  LoaderOptions lo;
  lo.batch_size = plan.micro_batch_size * plan.grad_accum_steps;
  lo.rank = rank;
  lo.world_size = world_size;
  lo.sampling = options.sampling;
  lo.seed = static_cast<uint64_t>(options.train.seed);
  lo.num_workers = plan.num_workers;
  lo.prefetch_factor = plan.prefetch_factor;
  lo.pin_memory = plan.pin_memory;
  return data.train_loader(lo);
}

}  // namespace

TrainingParts make_training_parts(const Plan& plan, const TrainerOptions& options, TrainableModel& model,
                                  const TrainingData& data, int rank, int world_size) {
  TrainingParts parts;
  parts.optimizer = make_adamw(plan, options.train, model);
  parts.precision = std::make_unique<MixedPrecision>(plan);
  parts.train_loader = make_train_loader(plan, options, data, rank, world_size);
  try {
    parts.tokenizer = data.tokenizer(options.tokenizer);
  } catch (const DataError& e) {  // resolve_dataset() already refused real mismatches
    warn_once("checkpoint-tokenizer", std::string("checkpoints will carry no tokenizer files: ") + e.what());
  }
  return parts;
}

}  // namespace hwt
