#include "hwtrain/train/training_parts.h"

#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace {

std::unique_ptr<AdamW> make_adamw(const Plan& plan, const TrainConfig& train, GPT& model) {
  std::vector<std::pair<std::string, torch::Tensor>> named_decay, named_no_decay;
  model->named_decay_and_no_decay(named_decay, named_no_decay);
  AdamWOptions opt;
  opt.beta1 = train.beta1;
  opt.beta2 = train.beta2;
  opt.eps = train.eps;
  opt.weight_decay = train.weight_decay;
  opt.fused = plan.fused_optimizer;
  opt.int8_moments = plan.optimizer_state_dtype == StateDtype::Int8;
  opt.defer_state = plan.sharding == Sharding::Zero2 || plan.sharding == Sharding::Zero3;
  return std::make_unique<AdamW>(named_decay, named_no_decay, opt);
}

// Every rank draws the same global batch of each step and keeps its rows (see batch_loader.h);
// rows per rank stay fixed through OOM retries (micro-batch halves, accumulation doubles).
std::unique_ptr<BatchLoader> make_train_loader(const Plan& plan, const TrainerOptions& options, int64_t block,
                                               const ShardedDataset& data, int rank, int world_size) {
  LoaderOptions lo;
  lo.batch_size = plan.micro_batch_size * plan.grad_accum_steps;
  lo.block_size = block;
  lo.rank = rank;
  lo.world_size = world_size;
  lo.sampling = options.sampling;
  lo.seed = static_cast<uint64_t>(options.train.seed);
  lo.num_workers = plan.num_workers;
  lo.prefetch_factor = plan.prefetch_factor;
  lo.pin_memory = plan.pin_memory;
  return std::make_unique<BatchLoader>(data.train(), lo, "training split of " + data.path().string());
}

}  // namespace

TrainingParts make_training_parts(const Plan& plan, const TrainerOptions& options, GPT& model,
                                  const ShardedDataset& data, int rank, int world_size) {
  TrainingParts parts;
  parts.optimizer = make_adamw(plan, options.train, model);
  parts.precision = std::make_unique<MixedPrecision>(plan);
  const int64_t block = model->config().block_size;
  parts.train_loader = make_train_loader(plan, options, block, data, rank, world_size);
  parts.val_sampler =
      std::make_unique<WindowSampler>(data, Split::kVal, block, static_cast<uint64_t>(options.train.seed) + 1);
  try {
    parts.tokenizer = dataset_tokenizer(data, options.tokenizer);
  } catch (const DataError& e) {  // resolve_dataset() already refused real mismatches
    warn_once("checkpoint-tokenizer", std::string("checkpoints will carry no tokenizer files: ") + e.what());
  }
  return parts;
}

}  // namespace hwt
