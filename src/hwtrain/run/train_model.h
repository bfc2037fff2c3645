// train_model: the seeds' one-call API over the Trainer, for a user's own model or a built-in one.
//   train_model(model, train, validation, options)  a TrainableModel (model/trainable_model.h: a
//       user's module in a few lines) on map-style ExampleSources (data/example_source.h);
//   train_model(model_config, tokenizer, sources, options)  hwtrain's GPT/Llama family on text
//       files (prepared and cached as `hwtrain prepare` does) with the tokenizer named as
//       data.tokenizer names it.
// Both detect the hardware, plan (every decision logged with its reason), train with the plan
// applied and return the history. The seeds' names map onto hwtrain's settings; each is optional,
// and a key the caller set explicitly in options.config wins over it (as everywhere):
//   use_amp         optimization.mixed_precision_dtype: true = auto (the planner's 16-bit dtype
//                   where the hardware runs one fast), false = fp32
//   log_gpu_memory  the peak CUDA memory of every step in the history (and log.gpu_log_interval
//                   = 1 s samples in the run's metrics); ignored with a note on a CPU plan
//   num_workers     optimization.num_workers;  pin_memory  optimization.pin_memory
//   batch_size      rows per optimizer step over all ranks (micro-batch x accumulation x ranks);
//                   the micro-batch is the planner's (memory model) or, for a user's model, the
//                   largest of a measured probe that divides it
//   epochs          train.max_steps = ceil(epochs x training rows / batch_size), rows drawn in a
//                   new order each epoch (data.sampling = sequential for token windows)
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/data/example_source.h"
#include "hwtrain/model/trainable_model.h"
#include "hwtrain/run/run_config.h"
#include "hwtrain/train/trainer.h"

namespace hwt {

struct TrainModelOptions {
  std::optional<bool> use_amp;
  bool log_gpu_memory = false;
  std::optional<int64_t> num_workers;
  std::optional<bool> pin_memory;
  double epochs = 1;
  std::optional<int64_t> batch_size;
  RunConfig config;                  // every other setting (train.lr, checkpoint.*, ...)
  std::filesystem::path run_dir;     // checkpoints and metrics; empty = runs/train_model-<time>
};

struct TrainHistory {
  std::vector<double> step_losses;                    // training loss of every step
  std::vector<double> epoch_losses;                   // mean step loss of each (last: partial) epoch
  std::vector<std::pair<int64_t, double>> val_losses;  // (step, validation loss)
  std::vector<int64_t> device_peak_bytes;             // per step, with log_gpu_memory on CUDA
  TrainResult result;
  std::filesystem::path run_dir;
};

// ConfigError for an unknown key, a batch_size below 1 or epochs <= 0, naming it.
TrainHistory train_model(std::shared_ptr<TrainableModel> model, std::shared_ptr<const ExampleSource> train,
                         std::shared_ptr<const ExampleSource> validation, const TrainModelOptions& options);
TrainHistory train_model(const ModelConfig& model, const std::string& tokenizer,
                         const std::vector<std::filesystem::path>& sources, const TrainModelOptions& options);

// The RunConfig that the seeds' names make of options.config (exposed for tests and the Python API).
RunConfig seed_settings(const TrainModelOptions& options);

// A user's model with a memory description (TrainableModel::memory_description): the largest
// micro-batch dividing rows_per_step (at most max_micro) whose predicted bytes fit the budget:
// fp32 weights and gradients (8 bytes per parameter), AdamW moments (8, or 2 with int8 states)
// and the description's activation bytes per row at the planned precision. 1 when none fits.
int64_t described_micro_batch(const ModelMemoryDescription& memory, int64_t parameters, const Plan& plan,
                              int64_t rows_per_step, int64_t max_micro);

}  // namespace hwt
