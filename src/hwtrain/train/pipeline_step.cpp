#include "hwtrain/train/pipeline_step.h"

#include <algorithm>

#include "hwtrain/core/clock.h"

namespace hwt {

std::vector<PipeAction> one_f_one_b(int64_t stage, int64_t stages, int64_t micro_batches) {
  const int64_t warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<PipeAction> out;
  for (int64_t k = 0; k < warmup; ++k) out.push_back({PipeOp::Forward, k});
  for (int64_t k = 0; k < micro_batches - warmup; ++k) {
    out.push_back({PipeOp::Forward, warmup + k});
    out.push_back({PipeOp::Backward, k});
  }
  for (int64_t k = micro_batches - warmup; k < micro_batches; ++k) out.push_back({PipeOp::Backward, k});
  return out;
}

double run_pipeline_step(PipelineStage& stage, const torch::Tensor& x_NT, const torch::Tensor& y_NT,
                         int64_t micro_batch, int64_t micro_batches, torch::Device device,
                         const PipelineStepHooks& hooks, StepMetrics& m) {
  TensorParallelComm& stages = stage.stages();
  const int s = static_cast<int>(stage.stage_index());
  const auto act_options = torch::TensorOptions().dtype(torch::kFloat).device(device);
  const std::vector<int64_t> act_shape = stage.activation_shape(micro_batch, x_NT.size(1));
  std::vector<torch::Tensor> inputs(static_cast<size_t>(micro_batches)), outputs(inputs.size());
  std::vector<std::function<void()>> sends;  // waited for at the end of the step
  double loss_sum = 0;
  for (const PipeAction& a : one_f_one_b(s, stage.stage_count(), micro_batches)) {
    const size_t k = static_cast<size_t>(a.micro);
    if (a.op == PipeOp::Forward) {
      const auto y = y_NT.narrow(0, a.micro * micro_batch, micro_batch).to(device, /*non_blocking=*/true);
      torch::Tensor in;
      if (stage.is_first()) {
        in = x_NT.narrow(0, a.micro * micro_batch, micro_batch).to(device, /*non_blocking=*/true);
      } else {
        in = torch::empty(act_shape, act_options);
        stages.recv(in, s - 1);
        in.requires_grad_(true);
      }
      const auto t0 = Clock::now();
      torch::Tensor out = hooks.forward(in, y);
      m.forward_seconds += seconds_since(t0);
      if (stage.is_last()) {
        loss_sum += out.detach().item<double>();
      } else {
        sends.push_back(stages.send_async(out.detach().to(torch::kFloat).contiguous(), s + 1));
      }
      inputs[k] = in;
      outputs[k] = out;
      continue;
    }
    hooks.before_backward(a.micro == micro_batches - 1);
    torch::Tensor grad;
    if (!stage.is_last()) {
      grad = torch::empty(act_shape, act_options);
      stages.recv(grad, s + 1);
    }
    const auto t1 = Clock::now();  // compute only: the time waiting for the next stage is the bubble's
    if (stage.is_last()) {
      hooks.backward_loss(outputs[k]);
    } else {
      torch::autograd::backward({outputs[k]}, {grad.to(outputs[k].scalar_type())});
    }
    m.backward_seconds += seconds_since(t1);
    if (!stage.is_first()) sends.push_back(stages.send_async(inputs[k].grad().to(torch::kFloat).contiguous(), s - 1));
    inputs[k] = outputs[k] = torch::Tensor();  // this micro-batch's activations are freed
  }
  for (auto& wait : sends) wait();
  torch::Tensor loss = torch::full({1}, stage.is_last() ? loss_sum : 0.0, act_options.dtype(torch::kFloat64));
  stages.all_reduce_sum(loss);
  return loss.item<double>() / static_cast<double>(micro_batches);
}

}  // namespace hwt
