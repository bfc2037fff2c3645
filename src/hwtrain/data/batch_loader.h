// BatchLoader: the training batches of one rank, assembled ahead of time by background threads.
// Step s covers global draws [s G, (s + 1) G) of its RowDraws (token windows of a DatasetSampler,
// or a user's examples: data/row_draws.h), G = batch_size * world_size; every rank computes the
// same G draws (distinct within the step) and takes rows [rank * batch_size, (rank + 1) *
// batch_size), so ranks never share a row in a step.
// Workers (persistent for the loader's life, across epochs) fill a bounded queue of
// num_workers * prefetch_factor batches; next() returns the batches in step order whatever the
// number of workers, and reports how long it waited. Batches are page-locked on CUDA machines
// (pin_memory) so the trainer's non_blocking copies overlap compute.
// Exact resumability: state() (seed, epoch, position) is the position of the next batch, and
// restore(state) continues the identical stream. Shape letters: N = batch_size, T = block_size.
#pragma once
#include <torch/torch.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "hwtrain/data/dataset_sampler.h"
#include "hwtrain/data/row_draws.h"

namespace hwt {

struct LoaderOptions {
  int64_t batch_size = 1;       // rows of one step for this rank (micro_batch_size * grad_accum_steps)
  int64_t block_size = 1;       // T (token windows; unused for examples)
  int64_t rank = 0;
  int64_t world_size = 1;
  SamplingMode sampling = SamplingMode::kRandom;
  uint64_t seed = 0;
  int64_t num_workers = 1;      // background threads (Plan::num_workers); 0 = assemble inside next()
  int64_t prefetch_factor = 2;  // batches queued per worker (Plan::prefetch_factor)
  bool pin_memory = false;      // page-locked batches; takes effect only when CUDA is available
  // ConfigError naming the option for values out of range.
  void validate() const;
};

// Where a loader stands: the next batch is global draw epoch * windows_per_epoch + position.
struct LoaderState {
  uint64_t seed = 0;
  int64_t epoch = 0;     // completed passes over the split's windows (all ranks together)
  int64_t position = 0;  // windows drawn in the current epoch (all ranks together)

  nlohmann::json to_json() const;  // {"seed": "hex", "epoch": e, "position": p}
  // DataError for a missing or ill-typed field ("training state of a checkpoint").
  static LoaderState from_json(const nlohmann::json& j);
  bool operator==(const LoaderState& o) const {
    return seed == o.seed && epoch == o.epoch && position == o.position;
  }
};

struct LoadedBatch {
  torch::Tensor x_NT;  // int64 token ids, [batch_size, block_size], CPU (pinned with pin_memory);
                       // for examples: the stacked inputs [batch_size, ...]
  torch::Tensor y_NT;  // x shifted left by one: the next token at every position (the targets)
  int64_t first_draw = 0;     // global draw of the step's first window (all ranks)
  double wait_seconds = 0;    // how long next() waited for this batch
};

class BatchLoader {
 public:
  // `what` names the tokens in errors. DataError when they hold fewer than block_size + 1 tokens.
  BatchLoader(TokenSequence tokens, LoaderOptions options, std::string what = "training split");
  // Draws of any kind (a user's examples: ExampleDraws); options.block_size is not used.
  BatchLoader(std::shared_ptr<const RowDraws> draws, LoaderOptions options, std::string what = "training examples");
  ~BatchLoader();  // stops and joins the workers
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The next step's batch for this rank. Rethrows an error a worker met assembling it.
  LoadedBatch next();

  LoaderState state() const;
  // Continues from `state` (discarding prefetched batches); its seed replaces the loader's.
  void restore(const LoaderState& state);

  int64_t windows_per_step() const { return options_.batch_size * options_.world_size; }
  int64_t windows_per_epoch() const { return draws_->draws_per_epoch(); }
  bool pinned() const { return pinned_; }
  // next() calls that found their batch not yet assembled (the workers were behind).
  int64_t num_starved() const { return num_starved_.load(std::memory_order_relaxed); }
  const LoaderOptions& options() const { return options_; }
  // Assembles the batch of global draws starting at `first_draw` for this rank (what workers run).
  LoadedBatch assemble(const RowDraws& draws, int64_t first_draw) const;

 private:
  struct Slot {
    // The step whose batch (or error) this slot holds, -1 while empty. Written under mu_; read
    // without it by next()'s short spin.
    std::atomic<int64_t> ready_step{-1};
    LoadedBatch batch;
    std::exception_ptr error;
    void reset() {
      ready_step.store(-1, std::memory_order_relaxed);
      batch = LoadedBatch{};
      error = nullptr;
    }
  };
  void worker_loop();
  void start_workers();

  LoaderOptions options_;
  std::string what_;
  bool pinned_ = false;
  std::shared_ptr<const RowDraws> draws_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int64_t base_draw_ = 0;     // global draw of step 0 (since construction or restore)
  int64_t consumed_ = 0;      // steps next() has returned
  int64_t next_produce_ = 0;  // next step a worker takes
  uint64_t generation_ = 0;   // bumped by restore(): batches of older generations are dropped
  bool stop_ = false;
  bool consumer_waiting_ = false;  // next() sleeps on ready_cv_
  int64_t workers_waiting_ = 0;    // workers sleep on work_cv_ (the queue is full)
  std::atomic<int64_t> num_starved_{0};
  std::vector<std::thread> workers_;
};

}  // namespace hwt
