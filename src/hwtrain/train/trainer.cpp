#include "hwtrain/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/Allocator.h>

#include <cmath>
#include <limits>

#include "hwtrain/core/clock.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/fault_injection.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/obs/memory_meter.h"
#include "hwtrain/obs/monitor.h"
#include "hwtrain/train/autocast.h"
#include "hwtrain/train/device_placement.h"
#include "hwtrain/model/gpt_model.h"
#include "hwtrain/train/lr_schedule.h"
#include "hwtrain/model/rng_state.h"
#include "hwtrain/train/training_parts.h"

namespace hwt {

namespace fs = std::filesystem;

namespace {

bool is_oom(const std::exception& e) {
  if (dynamic_cast<const OutOfMemoryError*>(&e) || dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  std::string what = e.what();
  return what.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos;
}

}  // namespace

Trainer::Trainer(TrainerOptions options, Plan plan, std::shared_ptr<TrainableModel> model,
                 std::shared_ptr<const TrainingData> data, fs::path run_dir, int rank, int world_size)
    : options_(std::move(options)),
      plan_(std::move(plan)),
      model_(std::move(model)),
      data_(std::move(data)),
      run_dir_(std::move(run_dir)),
      rank_(rank),
      world_size_(world_size),
      device_(plan_.device),
      micro_batch_size_(plan_.micro_batch_size),
      grad_accum_steps_(plan_.grad_accum_steps) {
  if (!model_ || !data_) throw ConfigError("the Trainer needs a model and training data");
  check_parameters_registered_once(model_->module());
  TrainingParts built = make_training_parts(plan_, options_, *model_, *data_, rank_, world_size_);
  optimizer_ = std::move(built.optimizer);
  precision_ = std::move(built.precision);
  train_loader_ = std::move(built.train_loader);
  batches_ = std::make_unique<DeviceBatches>(*train_loader_, device_, plan_.pin_memory);
  tokenizer_ = std::move(built.tokenizer);
  parts_.optimizer = optimizer_.get();
  parts_.precision = precision_.get();
  parts_.parameters = [this] { return parameters(); };
  parts_.grad_clip = options_.train.grad_clip;
  flops_per_row_ = model_->training_flops_per_row(data_->tokens_per_row());
  if (!model_->set_cast_outputs(plan_.autocast.cast_outputs) && plan_.precision != Precision::Fp32) {
    log_info("optimization.cast_outputs = {}: this model computes its loss in its own forward_loss, which decides",
             plan_.autocast.cast_outputs);
  }
  set_optimizer_in_backward(plan_.optimizer_in_backward());
  parts_.model_parallel = model_->model_parallel();
  if (model_->model_parallel()) {
    use_model_parallel_norm();
    set_gradient_sync(nullptr);  // still sums the gradients of weights several ranks hold
  }
  std::vector<std::pair<std::string, torch::Tensor>> weights;
  for (const auto& item : model_->module().named_parameters()) weights.emplace_back(item.key(), item.value());
  for (const auto& item : model_->module().named_buffers()) weights.emplace_back(item.key(), item.value());
  verify_placement("model tensor", weights, device_);
  // Offloaded moments (optimization.optimizer_state_device = cpu) live in host memory by design.
  verify_placement("optimizer state", optimizer_->state(),
                   optimizer_->options().host_state ? c10::Device(torch::kCPU) : device_);
  make_graph_step();
}

Trainer::Trainer(TrainerOptions options, Plan plan, GPT model, std::shared_ptr<const ShardedDataset> data,
                 fs::path run_dir, int rank, int world_size)
    : Trainer(options, std::move(plan), std::make_shared<GptModel>(model),
              std::make_shared<TokenWindows>(std::move(data), model->config().block_size,
                                             static_cast<uint64_t>(options.train.seed) + 1),
              std::move(run_dir), rank, world_size) {}

// A model split over ranks (tensor or pipeline parallel): the gradient norm of the whole model from
// the ranks' shares of its square (TrainableModel::squared_norm_share), and fp16's inf/NaN verdict
// agreed over the group, since each rank checks only its own weights.
void Trainer::use_model_parallel_norm() {
  TrainableModel* model = model_.get();
  parts_.model_parallel_norm = [model](const torch::Tensor& local) {
    torch::NoGradGuard no_grad;
    torch::Tensor squared = model->squared_norm_share(local * local, model->own_gradients()).reshape({1}).contiguous();
    model->model_parallel_sum(squared);
    return squared[0].clamp_min(0).sqrt();
  };
  parts_.model_parallel_sum = [model](torch::Tensor& t) { model->model_parallel_sum(t); };
}

void Trainer::set_optimizer_in_backward(bool enabled) {
  if (placement_ && optimizer_in_backward() == enabled) return;
  if (enabled && model_->model_parallel()) {
    throw ConfigError("optimization.optimizer_in_backward cannot run with dist.tensor_parallel or "
                      "dist.pipeline_parallel > 1 (the gradient norm spans the ranks); set it false");
  }
  if (!enabled) {
    placement_ = std::make_unique<UpdateAfterBackward>(parts_);
    return;
  }
  if (plan_.auto_batch_size) {
    throw ConfigError("the optimizer in backward cannot run with optimization.auto_batch_size, whose probe steps "
                      "update after backward");
  }
  placement_.reset();  // the placement being replaced releases nothing the new one needs
  placement_ = std::make_unique<UpdateInBackward>(parts_, grad_accum_steps_, world_size_);
}

void Trainer::enable_mixed_precision(Precision p) {
  if (optimizer_in_backward() && p == Precision::Fp16) {
    throw ConfigError("fp16 needs loss scaling, which the optimizer in backward cannot do; use bf16 or fp32");
  }
  precision_->enable(p);
}

void Trainer::set_optimizer_sharding(OptimizerSharding sharding) {
  if (optimizer_in_backward()) throw ConfigError("dist.sharding cannot run with the optimizer in backward");
  if (sharding.optimizer && !resumed_.empty()) {
    throw ConfigError("a resumed run's optimizer state was not given to the shards: pass "
                      "Trainer::take_resumed_state() to shard_training");
  }
  parts_.sharding = std::move(sharding);
  if (parts_.sharding.optimizer) {
    optimizer_ = parts_.sharding.optimizer;
    parts_.optimizer = optimizer_.get();
    parts_.parameters = parts_.sharding.parameters;
    if (precision_->precision() != Precision::Fp32) {
      precision_->pin(std::string("dist.sharding = ") + sharding_name(plan_.sharding) + " computes with " +
                      precision_name(precision_->precision()) +
                      " parameters; set optimization.mixed_precision_dtype = fp32 to train in fp32");
    }
  } else {
    optimizer_->set_owned(parts_.sharding.owned);
  }
}

double Trainer::elapsed_seconds() const { return elapsed_before_ + seconds_since(start_); }

void Trainer::request_stop(const std::string& reason) {
  if (!stop_requested_) stop_reason_ = reason;
  stop_requested_ = true;
}

std::vector<torch::Tensor> Trainer::parameters() const { return model_->module().parameters(); }

torch::Tensor Trainer::forward_loss(const torch::Tensor& x_BT, const torch::Tensor& y_BT) {
  return forward_loss(x_BT, y_BT, plan_.autocast.cache);
}

torch::Tensor Trainer::forward_loss(const torch::Tensor& x_BT, const torch::Tensor& y_BT, bool cache_casts) {
  const c10::ScalarType dtype = precision_->autocast_dtype();
  AutocastGuard autocast(device_.type(), dtype, true, cache_casts);
  const bool cast = plan_.autocast.cast_inputs && dtype != torch::kFloat32 && x_BT.is_floating_point();
  auto loss = model_->forward_loss(cast ? x_BT.to(dtype) : x_BT, y_BT);
  check_scalar_loss(loss, "the model's forward_loss");
  return loss_hook_ ? loss_hook_(loss) : loss;
}

double Trainer::run_micro_steps(const torch::Tensor& x_NT, const torch::Tensor& y_NT, StepMetrics& m) {
  if (PipelineStage* stage = model_->pipeline_stage()) return run_pipeline_micro_steps(*stage, x_NT, y_NT, m);
  double loss_sum = 0;
  for (int64_t k = 0; k < grad_accum_steps_; ++k) {
    auto x_BT = x_NT.narrow(0, k * micro_batch_size_, micro_batch_size_).to(device_, /*non_blocking=*/true);
    auto y_BT = y_NT.narrow(0, k * micro_batch_size_, micro_batch_size_).to(device_, /*non_blocking=*/true);
    if (inject_oom_step_ == step_) {
      inject_oom_step_ = -1;
      throw OutOfMemoryError("injected out-of-memory at step " + std::to_string(step_));
    }
    auto t0 = Clock::now();
    auto loss = forward_loss(x_BT, y_BT);
    m.forward_seconds += seconds_since(t0);
    if (parts_.grad_sync) parts_.grad_sync->begin_micro_step(k == grad_accum_steps_ - 1);
    auto t1 = Clock::now();
    if (placement_->runs_backward(loss)) {
      precision_->scaler().scale(loss / static_cast<double>(grad_accum_steps_)).backward();
    }
    m.backward_seconds += seconds_since(t1);
    loss_sum += loss.detach().item<double>();
  }
  return loss_sum / static_cast<double>(grad_accum_steps_);
}

StepMetrics Trainer::train_step() {
  fault_point("step");
  StepMetrics m;
  m.step = step_ + 1;
  auto step_start = Clock::now();
  // The whole step's data is drawn once (all ranks draw the same windows and take their slice),
  // so an OOM retry with smaller micro-batches sees exactly the same sequences.
  const int64_t per_rank = micro_batch_size_ * grad_accum_steps_;
  DeviceBatch batch = batches_->next();  // [per_rank, T] on the device; the next one is on its way
  verify_placement("training batch", {{"x", batch.x_NT}, {"y", batch.y_NT}}, device_);
  m.data_wait_seconds = batch.wait_seconds;
  m.forward_seconds = m.backward_seconds = m.comm_seconds = 0;
  const double lr = scheduled_lr(options_.train, step_) * lr_scale_;
  double grad_norm = 0;
  const double loss = run_step(batch, lr, m, grad_norm);
  precision_->note_step(std::isfinite(loss));  // may switch to fp32 for the next step

  ++step_;
  const int64_t rows = per_rank * world_size_;
  const int64_t tokens = rows * data_->tokens_per_row();
  tokens_seen_ += tokens;
  m.loss = loss;
  m.lr = lr;
  m.grad_norm = grad_norm;
  m.step_seconds = seconds_since(step_start);
  fill_step_metrics(m, tokens, rows);
  loss_history_.push_back(loss);
  return m;
}

double Trainer::run_step_with_retries(const torch::Tensor& x_NT, const torch::Tensor& y_NT, double lr,
                                      StepMetrics& m) {
  const int64_t per_rank = micro_batch_size_ * grad_accum_steps_;
  const RngState rng_at_start = rng_state(device_);
  for (;;) {
    try {
      placement_->begin_step(lr);
      return run_micro_steps(x_NT, y_NT, m);
    } catch (const std::exception& e) {
      const bool oom = is_oom(e);
      const bool no_kernel = !oom && precision_->precision() != Precision::Fp32 &&
                             MixedPrecision::is_unsupported_dtype_error(e);
      if (!oom && !no_kernel) throw;
      placement_->check_redo(e, oom, step_ + 1);
      optimizer_->zero_grad();
      if (parts_.grad_sync) parts_.grad_sync->discard();
      set_rng_state(rng_at_start, device_);
      m.forward_seconds = m.backward_seconds = 0;
      if (no_kernel) {  // redo the step in fp32 on the same data
        std::string what = e.what();
        precision_->fall_back(std::string("step ") + std::to_string(step_ + 1) + ": an operation has no " +
                              precision_name(precision_->precision()) + " kernel (" + what.substr(0, what.find('\n')) +
                              ")");
        continue;
      }
      if (micro_batch_size_ == 1) {
        throw HardwareError(std::string("out of memory at micro-batch 1 (") + e.what() +
                            "); set optimization.checkpoint_every = 1 (recompute activations) or use a smaller model");
      }
      // The largest micro-batch at most half the last that divides the step's rows (halving 100
      // would give 50, 25, 12: 8 x 12 = 96 rows and 4 lost).
      int64_t smaller = 1;
      for (const int64_t m : micro_batch_candidates(per_rank, micro_batch_size_ / 2)) smaller = m;
      micro_batch_size_ = smaller;
      grad_accum_steps_ = per_rank / micro_batch_size_;
      ++oom_recoveries_;
      log_warn("step {}: out of memory ({}); retrying with micro-batch {} x {} accumulation steps", step_ + 1,
               e.what(), micro_batch_size_, grad_accum_steps_);
    }
  }
}

void Trainer::fill_step_metrics(StepMetrics& m, int64_t tokens, int64_t rows) const {
  m.tokens_per_second = static_cast<double>(tokens) / m.step_seconds;
  const double rows_per_second = static_cast<double>(rows) / m.step_seconds;
  m.mfu = plan_.peak_flops > 0 ? rows_per_second * flops_per_row_ / (plan_.peak_flops * world_size_) : NAN;
  m.skipped_steps = precision_->skipped_steps();
  m.tokens_seen = tokens_seen_;
  m.elapsed_seconds = elapsed_seconds();
  m.rss_bytes = process_rss_bytes();
  if (device_.is_cuda()) {
    const DeviceMemory dm = device_memory(device_.index());
    m.device_allocated_bytes = dm.allocated_bytes;
    m.device_reserved_bytes = dm.reserved_bytes;
    m.device_peak_bytes = dm.peak_bytes;
  }
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  if (!data_->has_validation()) return NAN;
  const bool was_training = model_->module().is_training();
  model_->module().eval();
  const int64_t batches = data_->validation_batches(micro_batch_size_, options_.train.eval_batches);
  double sum = 0, weighted = 0;
  int64_t rows = 0;
  bool equal_rows = true;
  for (int64_t i = 0; i < batches; ++i) {
    const Batch b = data_->validation_batch(i, micro_batch_size_);  // the same batches every evaluation
    const double loss = forward_loss(b.x_BT.to(device_), b.y_BT.to(device_)).item<double>();
    const int64_t n = b.x_BT.size(0);
    equal_rows = equal_rows && n == micro_batch_size_;
    sum += loss;
    weighted += loss * static_cast<double>(n);
    rows += n;
  }
  if (was_training) model_->module().train();
  // Equal batches: their plain mean (the windows' evaluation, unchanged); else weighted by rows.
  return equal_rows ? sum / static_cast<double>(batches) : weighted / static_cast<double>(rows);
}

TrainResult Trainer::fit() {
  if (!resumed_.empty()) load_untaken_resumed_state();  // a ZeRO-2/3 plan never given its shards
  model_->module().train();
  start_ = Clock::now();
  callbacks_.train_begin(*this);
  callbacks_.load_states(std::exchange(resumed_callbacks_, {}));  // a resumed run's bests and patience
  double last_val = NAN;
  int64_t last_eval_step = -1, restores_evaluated = weight_restores_;
  auto run_eval = [&] {
    auto t0 = Clock::now();
    EvalMetrics e;
    e.step = step_;
    e.val_loss = evaluate();
    e.val_perplexity = std::exp(e.val_loss);
    e.elapsed_seconds = elapsed_seconds();
    last_val = e.val_loss;
    last_eval_step = step_;
    restores_evaluated = weight_restores_;
    log_debug("evaluation took {:.2f}s", seconds_since(t0));
    callbacks_.evaluation_end(*this, e);
  };
  while (step_ < options_.train.max_steps && !stop_requested_) {
    StepMetrics m = train_step();
    if (!std::isfinite(m.loss)) log_warn("step {}: loss is {}", step_, m.loss);
    callbacks_.step_end(*this, m);
    if (evaluates_at(step_)) run_eval();  // before the agreement: a stop asked during it is agreed too
    if (stop_any_ && stop_any_(stop_requested_) && !stop_requested_) request_stop("another rank stopped");
  }
  if (!stop_requested_) stop_reason_ = "reached train.max_steps = " + std::to_string(options_.train.max_steps);
  // The weights trained last, or those a callback put back (early stopping's best), are what the run reports.
  const bool unevaluated = last_eval_step != step_ || restores_evaluated != weight_restores_;
  if (unevaluated && options_.train.eval_interval > 0 && data_->has_validation()) run_eval();
  callbacks_.train_end(*this);

  TrainResult r;
  r.steps = step_;
  r.final_loss = loss_history_.empty() ? NAN : loss_history_.back();
  r.final_val_loss = last_val;
  r.elapsed_seconds = elapsed_seconds();
  r.tokens_seen = tokens_seen_;
  r.oom_recoveries = oom_recoveries_;
  r.stop_reason = stop_reason_;
  r.last_checkpoint = last_checkpoint_;
  return r;
}

}  // namespace hwt
