#include "hwtrain/train/update_placement.h"

#include <cmath>

#include "hwtrain/core/clock.h"
#include "hwtrain/core/error.h"
#include "hwtrain/train/optimizer_in_backward.h"
#include "hwtrain/train/update_step.h"

namespace hwt {

bool skips_update(const MixedPrecision& precision, double loss) {
  return !std::isfinite(loss) && precision.precision() != Precision::Fp32;
}

double UpdateAfterBackward::finish_step(double& loss, double lr, StepMetrics& m) {
  const auto t_start = Clock::now();
  if (parts_.grad_sync) {
    parts_.grad_sync->finish();
    m.comm_seconds = seconds_since(t_start);
  }
  // Every rank sees the same averaged gradients and loss, so all skip (or not) together.
  if (parts_.loss_mean) loss = parts_.loss_mean(loss);
  MixedPrecision& precision = *parts_.precision;
  UpdateRule rule;
  rule.max_grad_norm = parts_.grad_clip;
  rule.low_precision = precision.precision() != Precision::Fp32;
  rule.global_norm = parts_.sharding.global_norm ? parts_.sharding.global_norm : parts_.model_parallel_norm;
  rule.sum_across_ranks = parts_.sharding.sum_across_ranks ? parts_.sharding.sum_across_ranks : parts_.model_parallel_sum;
  const UpdateOutcome out = update_after_backward(
      parts_.parameters(), precision.scaler(), loss, rule,
      [&] {
        parts_.optimizer->step(lr);
        if (parts_.sharding.after_step) {
          auto t_sync = Clock::now();
          parts_.sharding.after_step();
          m.comm_seconds += seconds_since(t_sync);
        }
      },
      [&] { parts_.optimizer->zero_grad(); });
  if (out.skipped_for_loss) precision.count_skipped();  // keep the last good weights
  m.loss_scale = precision.scaler().current_scale();
  m.optimizer_seconds = seconds_since(t_start) - m.comm_seconds;
  return out.grad_norm;
}

void UpdateAfterBackward::check_redo(const std::exception& e, bool oom, int64_t step) const {
  // A redo runs on the failing rank alone: only a step whose collectives the other ranks have not
  // yet met (or that has none) can be repeated there.
  std::string why;
  if (parts_.sharding.optimizer) {
    why = "with dist.sharding = zero2/zero3, whose ranks reduce and gather every micro-step";
  } else if (parts_.model_parallel) {
    why = "with tensor or pipeline parallelism, whose ranks exchange activations in every micro-step";
  } else if (parts_.grad_sync && parts_.grad_sync->collective_started()) {
    why = "after its gradient all-reduces had begun, which the other ranks issue once per step";
  } else {
    return;
  }
  throw HardwareError(std::string(oom ? "out of memory" : "a missing low-precision kernel") + " in step " +
                      std::to_string(step) + " (" + e.what() + ") " + why +
                      ": one rank cannot redo the step alone; set a smaller train.micro_batch_size or "
                      "optimization.checkpoint_every = 1");
}

UpdateInBackward::UpdateInBackward(UpdateParts& parts, int64_t grad_accum_steps, int world_size) : parts_(parts) {
  // The config and the planner refuse these combinations; a hand-made plan or a switch must too.
  if (grad_accum_steps != 1 || parts.grad_clip > 0 || parts.precision->precision() == Precision::Fp16 ||
      world_size > 1) {
    throw ConfigError("the optimizer in backward needs one micro-batch per step (here " +
                      std::to_string(grad_accum_steps) + "), train.grad_clip = 0 (here " +
                      std::to_string(parts.grad_clip) + "), no fp16 and one process (here " +
                      std::to_string(world_size) + ")");
  }
  if (!parts.sharding.owned.empty() || parts.sharding.optimizer) throw ConfigError("ZeRO-1 sharding cannot run with the optimizer in backward");
  hooks_ = std::make_unique<OptimizerInBackward>(*parts.optimizer);
}

UpdateInBackward::~UpdateInBackward() = default;

void UpdateInBackward::begin_step(double lr) { hooks_->begin_step(lr); }

// The hooks move the weights during backward, so a loss to skip must be seen before it (a sync
// that fp32, which never skips, does not pay). The step is one micro-step without loss scaling.
bool UpdateInBackward::runs_backward(const torch::Tensor& loss) {
  if (parts_.precision->precision() == Precision::Fp32) return true;
  return !skips_update(*parts_.precision, loss.detach().item<double>());
}

void UpdateInBackward::check_redo(const std::exception& e, bool oom, int64_t step) const {
  if (!oom && hooks_->parameters_updated() == 0) return;  // nothing moved yet: redo in fp32
  throw HardwareError(std::string(oom ? "out of memory" : "a missing low-precision kernel") + " in step " +
                      std::to_string(step) + " (" + e.what() +
                      ") with optimization.optimizer_in_backward = true, which cannot redo a step " +
                      (oom ? "in smaller micro-batches; set a smaller train.micro_batch_size or "
                             "optimization.checkpoint_every = 1"
                           : "whose backward has already moved weights; set optimization.mixed_precision_dtype = fp32"));
}

double UpdateInBackward::finish_step(double& loss, double, StepMetrics& m) {
  double grad_norm = hooks_->grad_norm();  // the update happened in backward, unless the loss was non-finite
  if (skips_update(*parts_.precision, loss)) {
    parts_.precision->count_skipped();
    grad_norm = NAN;  // no backward ran
  }
  m.loss_scale = parts_.precision->scaler().current_scale();
  m.optimizer_seconds = 0;  // inside backward_seconds
  return grad_norm;
}

}  // namespace hwt
