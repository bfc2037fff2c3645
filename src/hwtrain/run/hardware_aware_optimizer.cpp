#include "hwtrain/run/hardware_aware_optimizer.h"

#include "hwtrain/train/process_settings.h"

#include <ATen/Context.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>

#include "hwtrain/obs/log.h"
#include "hwtrain/train/mixed_precision.h"
#include "hwtrain/train/update_step.h"

namespace hwt {

class HardwareAwareOptimizer::Probe : public Callback {
 public:
  explicit Probe(std::shared_ptr<Measured> m) : m_(std::move(m)) {}
  std::string name() const override { return "metrics_probe"; }
  void on_step_end(TrainerControl&, const StepMetrics& s) override {
    ++m_->steps;
    if (s.skipped_steps >= 0) m_->trainer_skipped = s.skipped_steps;  // a running count
    // A running mean that forgets the first steps (warm-up, allocator growth).
    const double w = m_->steps <= 3 ? 1.0 : 0.1;
    m_->tokens_per_second += w * (s.tokens_per_second - m_->tokens_per_second);
    if (s.mfu == s.mfu) m_->mfu += w * (s.mfu - m_->mfu);
    m_->step_seconds += w * (s.step_seconds - m_->step_seconds);
    if (s.rss_bytes == s.rss_bytes) m_->peak_rss_bytes = std::max(m_->peak_rss_bytes, s.rss_bytes);
    if (s.device_peak_bytes == s.device_peak_bytes) {
      m_->device_peak_bytes = std::max(m_->device_peak_bytes, s.device_peak_bytes);
    }
  }

 private:
  std::shared_ptr<Measured> m_;
};

HardwareAwareOptimizer::HardwareAwareOptimizer(RunConfig config, HardwareProfile hardware, PlanContext context)
    : config_(std::move(config)), hardware_(std::move(hardware)), plan_(make_plan(hardware_, config_, context)) {}

HardwareAwareOptimizer::HardwareAwareOptimizer(RunConfig config, PlanContext context)
    : HardwareAwareOptimizer(std::move(config), detect_hardware(), context) {}

std::string HardwareAwareOptimizer::get_hardware_summary() const { return hardware_summary(hardware_); }

std::string HardwareAwareOptimizer::get_optimization_summary() const {
  return plan_.to_text() + (plan_.layouts_considered.empty() ? "" : "\n" + plan_.layouts_text());
}

nlohmann::json HardwareAwareOptimizer::get_optimization_metrics() const {
  nlohmann::json j;
  j["active"] = {{"device", plan_.device.str()},
                 {"precision", precision_name(plan_.precision)},
                 {"loss_scaling", plan_.precision == Precision::Fp16},
                 {"attention", to_string(plan_.attention)},
                 {"activation_checkpointing_every", plan_.checkpoint_every},
                 {"micro_batch_size", plan_.micro_batch_size},
                 {"grad_accum_steps", plan_.grad_accum_steps},
                 {"fused_optimizer", plan_.fused_optimizer},
                 {"optimizer_in_backward", plan_.optimizer_in_backward()},
                 {"intra_op_threads", plan_.intra_op_threads},
                 {"loader_workers", plan_.num_workers},
                 {"pinned_memory", plan_.pin_memory},
                 {"tf32", plan_.allow_tf32},
                 {"sharding", sharding_name(plan_.sharding)}};
  j["predicted_peak_bytes"] = plan_.predicted_peak_bytes;
  j["measured"] = {{"steps", measured_->steps},
                   {"skipped_updates", skipped_steps_ + measured_->trainer_skipped},  // a user loop's or a Trainer's
                   {"tokens_per_second", measured_->tokens_per_second},
                   {"mfu", measured_->mfu},
                   {"step_seconds", measured_->step_seconds},
                   {"peak_rss_bytes", measured_->peak_rss_bytes},
                   {"device_peak_bytes", measured_->device_peak_bytes}};
  return j;
}

void HardwareAwareOptimizer::apply_optimizations(torch::nn::Module& module) const {
  apply_process_settings(plan_);
  if (plan_.pure_bf16_weights) module.to(torch::kBFloat16);
  module.to(device());
}

void HardwareAwareOptimizer::apply_optimizations(GPT& model) const {
  apply_process_settings(plan_);
  if (plan_.pure_bf16_weights) model->to(torch::kBFloat16);
  model->set_attention_kernel(plan_.attention);
  model->set_activation_checkpointing(plan_.checkpoint_every);
  model->set_fused_lm_head_loss(plan_.fused_lm_head_loss);
  model->to(device());
}

GPT HardwareAwareOptimizer::build_model() const {
  torch::manual_seed(static_cast<uint64_t>(config_.train.seed));
  // Deferred (zero2/zero3): placeholders that the sharding engine fills unit by unit, same values.
  GPT model(config_.model, config_.model.vocab_size, AttentionKernel::Sdpa,
            plan_.deferred_init ? std::make_shared<DeferredInit>() : nullptr);
  apply_optimizations(model);
  return model;
}

std::unique_ptr<AutocastGuard> HardwareAwareOptimizer::autocast() const {
  return std::make_unique<AutocastGuard>(device().type(), autocast_dtype(plan_.precision), true, plan_.autocast.cache);
}

GradScaler& HardwareAwareOptimizer::scaler() {
  if (!scaler_) {
    GradScalerOptions o = scaler_options(plan_.loss_scaling);
    o.enabled = plan_.precision == Precision::Fp16;
    scaler_ = std::make_unique<GradScaler>(o, device());
  }
  return *scaler_;
}

void HardwareAwareOptimizer::backward(const torch::Tensor& loss) {
  // The skip rule needs the loss on the host in low precision (a sync, as the Trainer's).
  if (plan_.precision != Precision::Fp32 && !std::isfinite(loss.detach().item<double>())) nonfinite_loss_ = true;
  scaler().scale(loss).backward();
}

double HardwareAwareOptimizer::step(torch::optim::Optimizer& optimizer, double max_grad_norm) {
  if (plan_.optimizer_in_backward()) {
    warn_once("user-loop-in-backward", "optimization.optimizer_in_backward applies to hwtrain's Trainer; a "
                                       "torch::optim optimizer in a user's loop steps after backward");
  }
  std::vector<torch::Tensor> params;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) params.push_back(p);
  }
  UpdateRule rule;  // one process: no global norm or verdict across ranks
  rule.max_grad_norm = max_grad_norm;
  rule.low_precision = plan_.precision != Precision::Fp32;
  const double loss = nonfinite_loss_ ? NAN : 0.0;  // the losses of the backward calls since the last step
  nonfinite_loss_ = false;
  const UpdateOutcome out = update_after_backward(
      params, scaler(), loss, rule, [&] { optimizer.step(); }, [&] { optimizer.zero_grad(); });
  if (!out.updated) ++skipped_steps_;
  return out.grad_norm;
}

std::shared_ptr<Callback> HardwareAwareOptimizer::metrics_probe() { return std::make_shared<Probe>(measured_); }

}  // namespace hwt
