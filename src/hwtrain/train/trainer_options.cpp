#include "hwtrain/train/trainer_options.h"

#include "hwtrain/data/dataset_sampler.h"

namespace hwt {

TrainerOptions trainer_options(const RunConfig& config) {
  TrainerOptions o;
  o.train = config.train;
  o.checkpoint = config.checkpoint;
  o.sampling = parse_sampling_mode(config.data.sampling);
  o.tokenizer = config.data.tokenizer;
  o.max_batch_size = config.optimization.max_batch_size;
  o.config_toml = config.to_toml();
  return o;
}

}  // namespace hwt
