// The Trainer's pipeline-parallel step: its micro-batches through this stage by the 1F1B schedule,
// under the step's autocast and loss scaling (train/pipeline_step.h).
#include "hwtrain/train/autocast.h"
#include "hwtrain/train/pipeline_step.h"
#include "hwtrain/train/shared_gradient_sync.h"
#include "hwtrain/train/trainer.h"

namespace hwt {

void Trainer::set_gradient_sync(std::shared_ptr<GradientSync> sync) {
  if (model_->model_parallel()) sync = std::make_shared<SharedGradientSync>(std::move(sync), *model_);
  parts_.grad_sync = std::move(sync);
}

double Trainer::run_pipeline_micro_steps(PipelineStage& stage, const torch::Tensor& x_NT, const torch::Tensor& y_NT,
                                         StepMetrics& m) {
  PipelineStepHooks hooks;
  hooks.forward = [this, &stage](const torch::Tensor& input, const torch::Tensor& targets, int64_t chunk) {
    AutocastGuard autocast(device_.type(), precision_->autocast_dtype(), true, plan_.autocast.cache);
    torch::Tensor out = stage.forward_stage(input, targets, chunk);
    if (!stage.computes_loss(chunk)) return out;
    check_scalar_loss(out, "the last pipeline stage's loss");
    return loss_hook_ ? loss_hook_(out) : out;
  };
  hooks.backward_loss = [this](const torch::Tensor& loss) {
    precision_->scaler().scale(loss / static_cast<double>(grad_accum_steps_)).backward();
  };
  hooks.before_backward = [this](bool last) {
    if (parts_.grad_sync) parts_.grad_sync->begin_micro_step(last);
  };
  return run_pipeline_step(stage, x_NT, y_NT, micro_batch_size_, grad_accum_steps_, device_, hooks, m);
}

}  // namespace hwt
