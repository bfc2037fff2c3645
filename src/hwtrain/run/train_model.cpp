#include "hwtrain/run/train_model.h"

#include <cmath>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/default_corpus.h"
#include "hwtrain/model/gpt_model.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/plan/planner.h"
#include "hwtrain/run/configured_callbacks.h"
#include "hwtrain/run/hardware_aware_optimizer.h"
#include "hwtrain/train/batch_size_probe.h"
#include "hwtrain/train/metrics_logger.h"
#include "hwtrain/train/model_checkpoint.h"

namespace hwt {

namespace fs = std::filesystem;

namespace {

// Records what the history returns, step by step.
class HistoryRecorder : public Callback {
 public:
  HistoryRecorder(TrainHistory& history, int64_t steps_per_epoch, bool device_memory)
      : h_(history), steps_per_epoch_(steps_per_epoch), device_memory_(device_memory) {}
  std::string name() const override { return "history"; }
  void on_step_end(TrainerControl&, const StepMetrics& m) override {
    h_.step_losses.push_back(m.loss);
    if (device_memory_) h_.device_peak_bytes.push_back(static_cast<int64_t>(m.device_peak_bytes));
    epoch_sum_ += m.loss;
    if (++epoch_steps_ == steps_per_epoch_) close_epoch();
  }
  void on_evaluation_end(TrainerControl&, const EvalMetrics& e) override { h_.val_losses.emplace_back(e.step, e.val_loss); }
  void on_train_end(TrainerControl&) override {
    if (epoch_steps_ > 0) close_epoch();
  }

 private:
  void close_epoch() {
    h_.epoch_losses.push_back(epoch_sum_ / static_cast<double>(epoch_steps_));
    epoch_sum_ = 0;
    epoch_steps_ = 0;
  }
  TrainHistory& h_;
  int64_t steps_per_epoch_, epoch_steps_ = 0;
  double epoch_sum_ = 0;
  bool device_memory_;
};

void set_unless_explicit(RunConfig& c, const std::string& key, const std::string& value) {
  if (c.is_set(key)) {
    log_info("train_model: {} is set explicitly; the seed-name setting ({}) is not applied", key, value);
    return;
  }
  c.apply_override(key + "=" + value);
}

fs::path choose_run_dir(const TrainModelOptions& o) {
  if (!o.run_dir.empty()) {
    std::error_code ec;
    if (fs::exists(o.run_dir / "checkpoints", ec) && !fs::is_empty(o.run_dir / "checkpoints", ec)) {
      throw ConfigError("train_model: run_dir " + o.run_dir.string() + " holds an earlier run's checkpoints; "
                        "choose a new directory (or remove them)");
    }
    return o.run_dir;
  }
  return timestamped_path("runs", "train_model-");
}

// train.max_steps from the epochs (unless set explicitly) and the steps of one epoch.
int64_t plan_epochs(RunConfig& c, const TrainModelOptions& o, int64_t rows, int64_t rows_per_step) {
  const int64_t per_epoch = std::max<int64_t>(1, (rows + rows_per_step - 1) / rows_per_step);
  if (!c.is_set("train.max_steps")) {
    c.train.max_steps = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o.epochs * static_cast<double>(per_epoch))));
  }
  log_info("train_model: {} rows per epoch, {} per step: {} steps per epoch, {} steps", rows, rows_per_step, per_epoch,
           c.train.max_steps);
  // Short runs: the default warmup (100 steps) would be most of them, and the default evaluation
  // interval might never come; unless set, warm up over 5% of the run and evaluate every epoch.
  if (!c.is_set("train.warmup_steps") && c.train.warmup_steps > c.train.max_steps / 10) {
    c.train.warmup_steps = std::max<int64_t>(1, c.train.max_steps / 20);
    log_info("train_model: train.warmup_steps = {} (5% of the run)", c.train.warmup_steps);
  }
  if (!c.is_set("train.eval_interval")) c.train.eval_interval = per_epoch;
  return per_epoch;
}

TrainHistory fit(Trainer& trainer, const RunConfig& c, HardwareAwareOptimizer& hao, int64_t steps_per_epoch,
                 bool log_gpu_memory, const fs::path& run_dir) {
  TrainHistory history;
  history.run_dir = run_dir;
  if (log_gpu_memory && !hao.device().is_cuda()) log_info("train_model: log_gpu_memory: the plan trains on the CPU; no GPU memory to log");
  trainer.add_callback(std::make_shared<HistoryRecorder>(history, steps_per_epoch, log_gpu_memory && hao.device().is_cuda()));
  // The sinks of a command-line run: progress lines, metrics.jsonl/csv, TensorBoard, report.html.
  trainer.add_callback(std::make_shared<MetricsLogger>(run_dir, c.log, c.train.max_steps, c.train.log_interval,
                                                       /*logging_rank=*/true, /*resumed=*/false));
  trainer.add_callback(hao.metrics_probe());
  // What the config asks of a command-line run too: early stopping, LR on plateau, the LR monitor
  // and the profiler (make_configured_callbacks), then checkpoints; a time budget only when set (the
  // default's 285 s is `make run`'s, not a fit's of so many epochs).
  trainer.add_callback(std::make_shared<TimeBudgetStopper>(c.is_set("train.time_budget") ? c.train.time_budget : 0.0));
  for (auto& callback : make_configured_callbacks(c)) trainer.add_callback(callback);
  trainer.add_callback(std::make_shared<ModelCheckpoint>(checkpoint_options(c.checkpoint)));
  history.result = trainer.fit();
  return history;
}

// A user's model's step: batch_size rows (optimization.target_batch_size, which seed_settings sets
// from it; else train.micro_batch_size x grad_accum_steps as configured), in micro-batches of
// train.micro_batch_size if set, else from its memory description (unless
// optimization.auto_batch_size is set true), else from measured probe steps (the largest divisor
// up to optimization.max_batch_size until the probe runs).
Plan plan_user_batch(Plan plan, TrainableModel& model, const RunConfig& c) {
  const int64_t target = c.optimization.target_batch_size;
  const int64_t rows = target > 0 ? target : c.train.micro_batch_size * c.train.grad_accum_steps;
  const auto memory = model.memory_description();
  std::string reason;
  if (c.is_set("train.micro_batch_size")) {
    plan.micro_batch_size = c.train.micro_batch_size;
    if (rows % plan.micro_batch_size != 0) {
      throw ConfigError("train_model: batch_size (optimization.target_batch_size) = " + std::to_string(rows) +
                        " is not a multiple of train.micro_batch_size = " +
                        std::to_string(plan.micro_batch_size));
    }
    plan.auto_batch_size = false;
    reason = "train.micro_batch_size set by user";
  } else if (memory && !(c.is_set("optimization.auto_batch_size") && c.optimization.auto_batch_size)) {
    plan.micro_batch_size = described_micro_batch(*memory, model.num_parameters(), plan, rows, c.optimization.max_batch_size);
    plan.auto_batch_size = false;
    reason = "the model's memory description within the budget";
  } else {
    plan.micro_batch_size = micro_batch_candidates(rows, c.optimization.max_batch_size).back();
    reason = plan.auto_batch_size ? "measured probe steps choose it before training" : "as configured";
  }
  plan.grad_accum_steps = rows / plan.micro_batch_size;
  plan.decide("micro_batch_size", std::to_string(plan.micro_batch_size) + " x " + std::to_string(plan.grad_accum_steps),
              reason);
  log_info("train_model: {} rows per step: micro-batch {} x {} accumulation steps ({})", rows, plan.micro_batch_size,
           plan.grad_accum_steps, reason);
  return plan;
}

}  // namespace

int64_t described_micro_batch(const ModelMemoryDescription& memory, int64_t parameters, const Plan& plan,
                              int64_t rows_per_step, int64_t max_micro) {
  const double moments = plan.optimizer_state_dtype == StateDtype::Int8 ? 2.0 : 8.0;
  const double fixed = static_cast<double>(parameters) * (8.0 + moments);
  const double per_row = plan.precision == Precision::Fp32 ? memory.activation_bytes_per_row_fp32
                                                           : memory.activation_bytes_per_row_16bit;
  int64_t best = 1;
  for (const int64_t m : micro_batch_candidates(rows_per_step, max_micro)) {
    if (fixed + per_row * static_cast<double>(m) <= plan.memory_budget_bytes) best = std::max(best, m);
  }
  return best;
}

RunConfig seed_settings(const TrainModelOptions& o) {
  if (!(o.epochs > 0)) throw ConfigError("train_model: epochs = " + std::to_string(o.epochs) + " is out of range; valid: > 0");
  if (o.batch_size && *o.batch_size < 1) {
    throw ConfigError("train_model: batch_size = " + std::to_string(*o.batch_size) + " is out of range; valid: >= 1");
  }
  RunConfig c = o.config;
  if (o.use_amp) set_unless_explicit(c, "optimization.mixed_precision_dtype", *o.use_amp ? "auto" : "fp32");
  if (o.num_workers) set_unless_explicit(c, "optimization.num_workers", std::to_string(*o.num_workers));
  if (o.pin_memory) set_unless_explicit(c, "optimization.pin_memory", *o.pin_memory ? "true" : "false");
  if (o.batch_size && c.is_set("optimization.target_batch_size") && c.optimization.target_batch_size != *o.batch_size) {
    throw ConfigError("train_model: batch_size = " + std::to_string(*o.batch_size) +
                      " and the config's optimization.target_batch_size = " +
                      std::to_string(c.optimization.target_batch_size) + " disagree; give one of them");
  }
  if (o.batch_size) set_unless_explicit(c, "optimization.target_batch_size", std::to_string(*o.batch_size));
  if (o.log_gpu_memory) set_unless_explicit(c, "log.gpu_log_interval", "1");
  c.validate();
  return c;
}

TrainHistory train_model(std::shared_ptr<TrainableModel> model, std::shared_ptr<const ExampleSource> train,
                         std::shared_ptr<const ExampleSource> validation, const TrainModelOptions& options) {
  if (!model || !train) throw ConfigError("train_model: a model and training examples are needed");
  RunConfig c = seed_settings(options);
  // The planner's memory model describes its own decoder family: planned on the smallest one, a
  // user's model gets its device, precision, threads and loader from the plan, and its micro-batch
  // from measured probe steps (unless train.micro_batch_size is set).
  c.model.n_layer = 1;
  c.model.n_head = 1;
  c.model.n_embd = 8;
  c.model.block_size = 8;
  c.model.vocab_size = 8;
  if (!c.is_set("train.micro_batch_size") && !c.is_set("optimization.auto_batch_size")) c.optimization.auto_batch_size = true;
  HardwareAwareOptimizer hao(c);
  log_info("train_model: hardware:\n{}\nplan (its memory figures describe the planner's decoder, not this model):\n{}",
           hao.get_hardware_summary(), hao.get_optimization_summary());
  hao.apply_optimizations(model->module());
  if (!model->set_activation_checkpointing(hao.plan().checkpoint_every)) {
    log_info("train_model: the plan recomputes every {} blocks, which this model does not support; not applied",
             hao.plan().checkpoint_every);
  }
  const Plan plan = plan_user_batch(hao.plan(), *model, c);
  const int64_t steps_per_epoch = plan_epochs(c, options, train->size(), plan.micro_batch_size * plan.grad_accum_steps);
  const fs::path run_dir = choose_run_dir(options);
  ensure_writable_dir(run_dir);
  Trainer trainer(trainer_options(c), plan, std::move(model), std::make_shared<ExampleData>(train, validation), run_dir);
  if (plan.auto_batch_size) trainer.probe_micro_batch();
  return fit(trainer, c, hao, steps_per_epoch, options.log_gpu_memory, run_dir);
}

TrainHistory train_model(const ModelConfig& model, const std::string& tokenizer, const std::vector<fs::path>& sources,
                         const TrainModelOptions& options) {
  if (sources.empty()) throw ConfigError("train_model: no sources; valid: text files or directories of them");
  RunConfig c = seed_settings(options);
  c.model = model;
  c.data.tokenizer = tokenizer;
  if (!c.is_set("data.sampling")) c.data.sampling = SamplingMode::kSequential;  // epochs: every window once
  const fs::path run_dir = choose_run_dir(options);
  ensure_writable_dir(run_dir);
  if (sources.size() == 1) {
    c.data.path = sources[0].string();
  } else {  // one directory of links, named by the sources: prepared (and cached) as one corpus
    uint64_t key = 0;
    for (const auto& src : sources) {
      for (const char ch : fs::weakly_canonical(src).string()) key = counter_hash(key, static_cast<unsigned char>(ch));
    }
    const fs::path dir = data_cache_dir(c.data) / fmt::format("sources-{:016x}", key);
    fs::create_directories(dir);
    for (size_t i = 0; i < sources.size(); ++i) {
      if (!fs::is_regular_file(sources[i])) throw ConfigError("train_model: source " + sources[i].string() + " is not a file");
      const fs::path link = dir / (std::to_string(i) + "-" + sources[i].filename().string());
      if (!fs::exists(fs::symlink_status(link))) fs::create_symlink(fs::absolute(sources[i]), link);
    }
    c.data.path = dir.string();
  }
  auto data = std::make_shared<const ShardedDataset>(resolve_dataset(c.data));
  c.model.vocab_size = resolve_vocab_size(c.model, data->vocab_size());
  c.validate();
  HardwareAwareOptimizer hao(c);
  log_info("train_model: plan:\n{}", hao.get_optimization_summary());
  const Plan& plan = hao.plan();
  const int64_t windows = std::max<int64_t>(1, data->num_train_tokens() / c.model.block_size);
  const int64_t steps_per_epoch = plan_epochs(c, options, windows, plan.micro_batch_size * plan.grad_accum_steps);
  Trainer trainer(trainer_options(c), plan, hao.build_model(), data, run_dir);
  if (plan.auto_batch_size) trainer.probe_micro_batch();
  return fit(trainer, c, hao, steps_per_epoch, options.log_gpu_memory, run_dir);
}

}  // namespace hwt
