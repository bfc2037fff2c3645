// The Trainer's step as one CUDA graph where the plan asks for it (train/cuda_graph_step.h), and
// the choice between that and the eager step.
#include "hwtrain/obs/log.h"
#include "hwtrain/train/autocast.h"
#include "hwtrain/train/trainer.h"

namespace hwt {

void Trainer::make_graph_step() {
  if (!plan_.cuda_graphs) return;
  if (!device_.is_cuda()) {
    log_warn("the plan asks for CUDA graphs on {}: the steps run eagerly", device_.str());
    return;
  }
  GraphedStep step;
  step.forward_backward = [this](const torch::Tensor& x_NT, const torch::Tensor& y_NT) {
    return graphed_micro_steps(x_NT, y_NT);
  };
  step.parameters = [this] { return parts_.parameters(); };
  step.optimizer = [this]() -> AdamW& { return *optimizer_; };
  step.max_grad_norm = options_.train.grad_clip;
  step.low_precision = [this] { return precision_->precision() != Precision::Fp32; };
  step.signature = [this] {
    return std::string(precision_name(precision_->precision())) + ", micro-batch " + std::to_string(micro_batch_size_) +
           " x " + std::to_string(grad_accum_steps_);
  };
  step.obstacle = [this] { return graph_obstacle(); };
  graph_ = std::make_unique<CudaGraphStep>(std::move(step));
}

std::string Trainer::graph_obstacle() const {
  if (parts_.grad_sync) return "a gradient sync across ranks (its collectives are not captured)";
  if (model_->model_parallel()) return "a model split over ranks";
  if (optimizer_in_backward()) return "the optimizer in backward (per-parameter hooks)";
  if (parts_.sharding.optimizer || !parts_.sharding.owned.empty()) return "ZeRO sharding";
  if (precision_->precision() == Precision::Fp16) return "fp16 loss scaling, which decides on the host each step";
  return "";
}

// The eager micro-steps' arithmetic without a host read: the losses stay on the device, and the
// autocast cache is off (its casts would be freed behind the graph; they are the same values).
torch::Tensor Trainer::graphed_micro_steps(const torch::Tensor& x_NT, const torch::Tensor& y_NT) {
  std::vector<torch::Tensor> losses;
  for (int64_t k = 0; k < grad_accum_steps_; ++k) {
    const auto x_BT = x_NT.narrow(0, k * micro_batch_size_, micro_batch_size_);
    const auto y_BT = y_NT.narrow(0, k * micro_batch_size_, micro_batch_size_);
    auto loss = forward_loss(x_BT, y_BT, /*cache_casts=*/false);
    (loss / static_cast<double>(grad_accum_steps_)).backward();  // no fp16 scaling: the planner refuses it
    losses.push_back(loss.detach().to(torch::kFloat32).reshape({1}));
  }
  return torch::cat(losses);
}

double Trainer::run_step(const DeviceBatch& batch, double lr, StepMetrics& m, double& grad_norm) {
  if (graph_ && graph_->wants()) {
    if (auto r = graph_->run(batch.x_NT, batch.y_NT, lr, step_ + 1)) {
      double sum = 0;  // as the eager step sums its micro-steps' losses: in order, in double
      for (double l : r->micro_losses) sum += l;
      const double loss = sum / static_cast<double>(r->micro_losses.size());
      if (!r->updated) precision_->count_skipped();
      m.forward_seconds = m.backward_seconds = m.optimizer_seconds = kUnknown;  // one launch: not separable
      m.loss_scale = precision_->scaler().current_scale();
      grad_norm = r->grad_norm;
      return loss;
    }
  }
  double loss = run_step_with_retries(batch.x_NT, batch.y_NT, lr, m);
  grad_norm = placement_->finish_step(loss, lr, m);
  if (graph_) graph_->count_eager_step();
  return loss;
}

}  // namespace hwt
