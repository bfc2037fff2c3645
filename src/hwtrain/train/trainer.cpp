#include "hwtrain/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/Allocator.h>

#include <cmath>
#include <limits>

#include "hwtrain/core/error.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/obs/monitor.h"
#include "hwtrain/train/autocast.h"
#include "hwtrain/train/lr_schedule.h"
#include "hwtrain/train/training_checkpoint.h"

namespace hwt {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

c10::ScalarType autocast_dtype_for(Precision p) {
  switch (p) {
    case Precision::Bf16: return torch::kBFloat16;
    case Precision::Fp16: return torch::kFloat16;
    case Precision::Fp32: return torch::kFloat32;
  }
  return torch::kFloat32;
}

torch::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

bool is_oom(const std::exception& e) {
  if (dynamic_cast<const OutOfMemoryError*>(&e) || dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  std::string what = e.what();
  return what.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos;
}

}  // namespace

double training_flops_per_token(const ModelConfig& m, int64_t num_params) {
  return 6.0 * static_cast<double>(num_params) +
         12.0 * static_cast<double>(m.n_layer * m.n_embd * m.block_size);
}

Trainer::Trainer(RunConfig config, Plan plan, GPT model, std::shared_ptr<const TokenFile> data, fs::path run_dir,
                 int rank, int world_size)
    : config_(std::move(config)),
      plan_(std::move(plan)),
      model_(std::move(model)),
      data_(std::move(data)),
      run_dir_(std::move(run_dir)),
      rank_(rank),
      world_size_(world_size),
      device_(plan_.device),
      autocast_dtype_(autocast_dtype_for(plan_.precision)),
      micro_batch_size_(plan_.micro_batch_size),
      grad_accum_steps_(plan_.grad_accum_steps) {
  std::vector<torch::Tensor> decay, no_decay;
  model_->decay_and_no_decay(decay, no_decay);
  // Names key the optimizer state in checkpoints; match tensors to their parameter names.
  std::vector<std::pair<std::string, torch::Tensor>> named_decay, named_no_decay;
  for (const auto& item : model_->named_parameters()) {
    for (const auto& d : decay) {
      if (d.is_same(item.value())) named_decay.emplace_back(item.key(), item.value());
    }
    for (const auto& n : no_decay) {
      if (n.is_same(item.value())) named_no_decay.emplace_back(item.key(), item.value());
    }
  }
  AdamWOptions opt;
  opt.beta1 = config_.train.beta1;
  opt.beta2 = config_.train.beta2;
  opt.eps = config_.train.eps;
  opt.weight_decay = config_.train.weight_decay;
  opt.fused = plan_.fused_optimizer;
  optimizer_ = std::make_unique<AdamW>(named_decay, named_no_decay, opt);

  GradScalerOptions scaler_options;
  scaler_options.enabled = plan_.precision == Precision::Fp16;  // bf16 has fp32's exponent range
  scaler_ = std::make_unique<GradScaler>(scaler_options, device_);

  const int64_t block = model_->config().block_size;
  train_sampler_ = std::make_unique<WindowSampler>(data_->train(), block, static_cast<uint64_t>(config_.train.seed));
  val_sampler_ = std::make_unique<WindowSampler>(data_->val(), block, static_cast<uint64_t>(config_.train.seed) + 1);
  flops_per_token_ = training_flops_per_token(model_->config(), model_->num_parameters(false));
}

double Trainer::elapsed_seconds() const { return elapsed_before_ + seconds_since(start_); }

void Trainer::request_stop(const std::string& reason) {
  if (!stop_requested_) stop_reason_ = reason;
  stop_requested_ = true;
}

std::vector<torch::Tensor> Trainer::parameters() const { return model_->parameters(); }

torch::Tensor Trainer::forward_loss(const torch::Tensor& x_BT, const torch::Tensor& y_BT) {
  AutocastGuard autocast(device_.type(), autocast_dtype_);
  auto logits_BTV = model_->forward(x_BT);
  return model_->loss(logits_BTV, y_BT);
}

double Trainer::run_micro_steps(const torch::Tensor& x_NT, const torch::Tensor& y_NT, StepMetrics& m) {
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
    if (grad_sync_) grad_sync_->begin_micro_step(k == grad_accum_steps_ - 1);
    auto t1 = Clock::now();
    scaler_->scale(loss / static_cast<double>(grad_accum_steps_)).backward();
    m.backward_seconds += seconds_since(t1);
    loss_sum += loss.detach().item<double>();
  }
  return loss_sum / static_cast<double>(grad_accum_steps_);
}

StepMetrics Trainer::train_step() {
  StepMetrics m;
  m.step = step_ + 1;
  auto step_start = Clock::now();
  // The whole step's data is drawn once (all ranks draw the same windows and take their slice),
  // so an OOM retry with smaller micro-batches sees exactly the same sequences.
  const int64_t per_rank = micro_batch_size_ * grad_accum_steps_;
  torch::Tensor x_NT, y_NT;
  train_sampler_->next_batch(per_rank * world_size_, x_NT, y_NT);
  x_NT = x_NT.narrow(0, rank_ * per_rank, per_rank);
  y_NT = y_NT.narrow(0, rank_ * per_rank, per_rank);
  m.data_wait_seconds = seconds_since(step_start);

  m.forward_seconds = m.backward_seconds = m.comm_seconds = 0;
  const torch::Tensor rng_at_start = cpu_rng_state();
  double loss = 0;
  for (;;) {
    try {
      loss = run_micro_steps(x_NT, y_NT, m);
      break;
    } catch (const std::exception& e) {
      if (!is_oom(e)) throw;
      optimizer_->zero_grad();
      set_cpu_rng_state(rng_at_start);
      if (micro_batch_size_ == 1) {
        throw HardwareError(std::string("out of memory at micro-batch 1 (") + e.what() +
                            "); enable optimization.enable_gradient_checkpointing or use a smaller model");
      }
      micro_batch_size_ /= 2;
      grad_accum_steps_ = per_rank / micro_batch_size_;
      ++oom_recoveries_;
      log_warn("step {}: out of memory ({}); retrying with micro-batch {} x {} accumulation steps", step_ + 1,
               e.what(), micro_batch_size_, grad_accum_steps_);
      m.forward_seconds = m.backward_seconds = 0;
    }
  }

  auto t_opt = Clock::now();
  if (grad_sync_) {
    auto t_comm = Clock::now();
    grad_sync_->finish();
    m.comm_seconds = seconds_since(t_comm);
  }
  auto params = parameters();
  scaler_->unscale(params);
  double grad_norm;
  if (config_.train.grad_clip > 0) {
    grad_norm = torch::nn::utils::clip_grad_norm_(params, config_.train.grad_clip, 2.0, /*error_if_nonfinite=*/false);
  } else {
    grad_norm = torch::nn::utils::clip_grad_norm_(params, std::numeric_limits<double>::infinity());
  }
  const double lr = scheduled_lr(config_.train, step_) * lr_scale_;
  if (!scaler_->found_inf()) optimizer_->step(lr);
  scaler_->update();
  optimizer_->zero_grad();
  m.optimizer_seconds = seconds_since(t_opt) - m.comm_seconds;

  ++step_;
  const int64_t tokens = per_rank * world_size_ * model_->config().block_size;
  tokens_seen_ += tokens;
  if (loss_mean_) loss = loss_mean_(loss);
  m.loss = loss;
  m.lr = lr;
  m.grad_norm = grad_norm;
  m.step_seconds = seconds_since(step_start);
  m.tokens_per_second = static_cast<double>(tokens) / m.step_seconds;
  m.mfu = plan_.peak_flops > 0 ? m.tokens_per_second * flops_per_token_ / (plan_.peak_flops * world_size_) : NAN;
  m.loss_scale = scaler_->current_scale();
  m.skipped_steps = scaler_->skipped_steps();
  m.tokens_seen = tokens_seen_;
  m.elapsed_seconds = elapsed_seconds();
  m.rss_bytes = process_rss_bytes();
  loss_history_.push_back(loss);
  return m;
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  const bool was_training = model_->is_training();
  model_->eval();
  double sum = 0;
  torch::Tensor x_BT, y_BT;
  for (int64_t i = 0; i < config_.train.eval_batches; ++i) {
    val_sampler_->batch_at(i, micro_batch_size_, x_BT, y_BT);  // the same batches every evaluation
    sum += forward_loss(x_BT.to(device_), y_BT.to(device_)).item<double>();
  }
  if (was_training) model_->train();
  return sum / static_cast<double>(config_.train.eval_batches);
}

TrainResult Trainer::fit() {
  model_->train();
  start_ = Clock::now();
  callbacks_.train_begin(*this);
  double last_val = NAN;
  int64_t last_eval_step = -1;
  auto run_eval = [&] {
    auto t0 = Clock::now();
    EvalMetrics e;
    e.step = step_;
    e.val_loss = evaluate();
    e.val_perplexity = std::exp(e.val_loss);
    e.elapsed_seconds = elapsed_seconds();
    last_val = e.val_loss;
    last_eval_step = step_;
    log_debug("evaluation took {:.2f}s", seconds_since(t0));
    callbacks_.evaluation_end(*this, e);
  };
  while (step_ < config_.train.max_steps && !stop_requested_) {
    StepMetrics m = train_step();
    if (!std::isfinite(m.loss)) log_warn("step {}: loss is {}", step_, m.loss);
    callbacks_.step_end(*this, m);
    const int64_t every = config_.train.eval_interval;
    if (every > 0 && step_ % every == 0) run_eval();
  }
  if (!stop_requested_) stop_reason_ = "reached train.max_steps = " + std::to_string(config_.train.max_steps);
  if (last_eval_step != step_ && config_.train.eval_interval > 0) run_eval();
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

NamedTensors Trainer::snapshot_weights() const {
  NamedTensors out;
  for (const auto& item : model_->named_parameters()) out.emplace_back(item.key(), item.value().detach().clone());
  return out;
}

void Trainer::restore_weights(const NamedTensors& weights) {
  torch::NoGradGuard no_grad;
  auto params = model_->named_parameters();
  for (const auto& [name, value] : weights) {
    auto* p = params.find(name);
    if (!p) throw IoError("weights lack no parameter named '" + name + "' in this model");
    p->copy_(value);
  }
}

fs::path Trainer::save_checkpoint() {
  if (rank_ != 0) return {};
  TrainingCheckpoint ckpt;
  ckpt.model = snapshot_weights();
  ckpt.optimizer = optimizer_->state();
  for (auto& t : scaler_->state()) ckpt.optimizer.push_back(t);
  ckpt.optimizer.emplace_back("rng.cpu", cpu_rng_state());
  ckpt.state = {{"format_version", 1},
                {"step", step_},
                {"tokens_seen", tokens_seen_},
                {"elapsed_seconds", elapsed_seconds()},
                {"sampler_position", train_sampler_->position()},
                {"lr_scale", lr_scale_},
                {"micro_batch_size", micro_batch_size_},
                {"grad_accum_steps", grad_accum_steps_},
                {"world_size", world_size_},
                {"dataset",
                 {{"tokenizer", data_->tokenizer_name()},
                  {"vocab_size", data_->vocab_size()},
                  {"fingerprint", data_->fingerprint()}}}};
  ckpt.config_toml = config_.to_toml();
  ckpt.plan_json = plan_.to_json();
  fs::path dir = config_.checkpoint.dir.empty() ? run_dir_ / "checkpoints" : fs::path(config_.checkpoint.dir);
  CheckpointStore store(dir, config_.checkpoint.keep_last);
  fs::path written = store.save(step_, [&](const fs::path& staging) { write_training_checkpoint(staging, ckpt); });
  last_checkpoint_ = written;
  callbacks_.checkpoint(*this, written);
  return written;
}

void Trainer::resume_from(const fs::path& checkpoint) {
  TrainingCheckpoint ckpt = read_training_checkpoint(checkpoint);
  const auto& ds = ckpt.state.at("dataset");
  if (ds.at("tokenizer") != data_->tokenizer_name() || ds.at("vocab_size") != data_->vocab_size()) {
    throw DataError("checkpoint " + checkpoint.string() + " was trained with tokenizer '" +
                    ds.at("tokenizer").get<std::string>() + "' (vocabulary " + ds.at("vocab_size").dump() +
                    ") but the dataset uses '" + data_->tokenizer_name() + "' (vocabulary " +
                    std::to_string(data_->vocab_size()) + "); prepare the data with the checkpoint's tokenizer");
  }
  if (ds.at("fingerprint") != data_->fingerprint()) {
    warn_once("resume-dataset", "resuming on a dataset other than the checkpoint's (fingerprint differs)");
  }
  restore_weights(ckpt.model);
  NamedTensors opt, scaler;
  torch::Tensor rng;
  for (auto& [name, t] : ckpt.optimizer) {
    if (name.rfind("scaler.", 0) == 0) scaler.emplace_back(name, t);
    else if (name == "rng.cpu") rng = t;
    else opt.emplace_back(name, t);
  }
  optimizer_->load_state(opt);
  scaler_->load_state(scaler);
  if (rng.defined()) set_cpu_rng_state(rng);
  const auto& s = ckpt.state;
  step_ = s.at("step");
  tokens_seen_ = s.at("tokens_seen");
  elapsed_before_ = s.at("elapsed_seconds");
  train_sampler_->set_position(s.at("sampler_position"));
  lr_scale_ = s.at("lr_scale");
  if (s.value("world_size", 1) == world_size_) {
    micro_batch_size_ = s.at("micro_batch_size");
    grad_accum_steps_ = s.at("grad_accum_steps");
  }
  log_info("resumed from {} at step {}", checkpoint.string(), step_);
}

}  // namespace hwt
