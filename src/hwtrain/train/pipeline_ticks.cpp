#include "hwtrain/train/pipeline_ticks.h"

#include <deque>
#include <stdexcept>
#include <string>
#include <utility>

#include "hwtrain/core/clock.h"

namespace hwt {

std::vector<PipelineTick> interleaved_ticks(int64_t stage, int64_t stages, int64_t chunks, int64_t micro_batches) {
  interleaved_one_f_one_b(stage, stages, chunks, micro_batches);  // the same checks
  const int64_t total = micro_batches * chunks, all_forwards_first = micro_batches == stages ? stages : 0;
  const auto first_backward = [&](int64_t s) {
    return 2 * (stages - s - 1) + (chunks - 1) * stages + all_forwards_first + s;
  };
  std::vector<PipelineTick> ticks(static_cast<size_t>(first_backward(0) + total));  // stage 0 ends last
  for (int64_t k = 0; k < total; ++k) {
    ticks[static_cast<size_t>(k + stage)].forward = k;
    ticks[static_cast<size_t>(first_backward(stage) + k)].backward = k;
  }
  return ticks;
}

namespace {

// One step of one stage: its ticks, and what it holds between them.
class TickedStep {
 public:
  TickedStep(PipelineStage& stage, const torch::Tensor& x_NT, const torch::Tensor& y_NT, int64_t micro_batch,
             int64_t micro_batches, torch::Device device, const PipelineStepHooks& hooks, StepMetrics& m)
      : stage_(stage), x_NT_(x_NT), y_NT_(y_NT), micro_batch_(micro_batch), micro_batches_(micro_batches),
        hooks_(hooks), m_(m), p_(stage.stage_count()), v_(stage.chunk_count()), s_(stage.stage_index()),
        prev_(static_cast<int>((s_ - 1 + p_) % p_)), next_(static_cast<int>((s_ + 1) % p_)),
        act_options_(torch::TensorOptions().dtype(torch::kFloat).device(device)),
        act_shape_(stage.activation_shape(micro_batch, x_NT.size(1))),
        mine_(interleaved_ticks(s_, p_, v_, micro_batches)), prevs_(interleaved_ticks(prev_, p_, v_, micro_batches)),
        nexts_(interleaved_ticks(next_, p_, v_, micro_batches)), activations_in_(static_cast<size_t>(v_)),
        gradients_in_(activations_in_.size()), pending_(activations_in_.size()) {}

  double run() {
    for (size_t tick = 0; tick < mine_.size(); ++tick) {
      torch::Tensor activation, gradient;  // what this tick sends on and back
      if (mine_[tick].forward >= 0) activation = forward(mine_[tick].forward);
      if (mine_[tick].backward >= 0) gradient = backward(mine_[tick].backward);
      exchange(tick, activation, gradient);
    }
    return loss_sum_;
  }

 private:
  struct Pending {
    int64_t micro;
    torch::Tensor input, output;
  };

  static torch::Tensor take(std::deque<torch::Tensor>& queue, const char* what) {
    if (queue.empty()) throw std::logic_error(std::string("pipeline ticks: a ") + what + " was used before it came");
    torch::Tensor t = std::move(queue.front());
    queue.pop_front();
    return t;
  }

  torch::Tensor forward(int64_t k) {
    const PipeAction a = interleaved_action(PipeOp::Forward, k, p_, v_);
    const auto rows = [&](const torch::Tensor& t) {
      return t.narrow(0, a.micro * micro_batch_, micro_batch_).to(act_options_.device(), /*non_blocking=*/true);
    };
    torch::Tensor in;
    if (stage_.takes_tokens(a.chunk)) {
      in = rows(x_NT_);
    } else {
      in = take(activations_in_[static_cast<size_t>(a.chunk)], "activation");
      in.requires_grad_(true);
    }
    const auto t0 = Clock::now();
    torch::Tensor out = hooks_.forward(in, rows(y_NT_), a.chunk);
    m_.forward_seconds += seconds_since(t0);
    pending_[static_cast<size_t>(a.chunk)].push_back({a.micro, in, out});
    if (stage_.computes_loss(a.chunk)) {
      loss_sum_ += out.detach().item<double>();
      return {};
    }
    return out.detach().to(torch::kFloat).contiguous();
  }

  torch::Tensor backward(int64_t j) {
    const PipeAction a = interleaved_action(PipeOp::Backward, j, p_, v_);
    auto& pending = pending_[static_cast<size_t>(a.chunk)];
    if (pending.empty() || pending.front().micro != a.micro) {
      throw std::logic_error("pipeline ticks: a backward out of its forwards' order");
    }
    const Pending held = std::move(pending.front());
    pending.pop_front();
    torch::Tensor grad;
    if (!stage_.computes_loss(a.chunk)) grad = take(gradients_in_[static_cast<size_t>(a.chunk)], "gradient");
    hooks_.before_backward(j + 1 == micro_batches_ * v_);
    const auto t1 = Clock::now();
    if (stage_.computes_loss(a.chunk)) {
      hooks_.backward_loss(held.output);
    } else {
      torch::autograd::backward({held.output}, {grad.to(held.output.scalar_type())});
    }
    m_.backward_seconds += seconds_since(t1);
    if (stage_.takes_tokens(a.chunk)) return {};
    return held.input.grad().to(torch::kFloat).contiguous();
  }

  // The tick's group: activations (sent on, received from the previous stage), then gradients (sent
  // back, received from the next stage); what a neighbour sends here is what its own tick produced.
  void exchange(size_t tick, torch::Tensor& activation, torch::Tensor& gradient) {
    std::vector<TensorParallelComm::Transfer> ops;
    torch::Tensor activation_in, gradient_in;
    int64_t activation_chunk = -1, gradient_chunk = -1;
    const int64_t last = p_ * v_ - 1;
    if (activation.defined()) {
      const int64_t chunk = interleaved_action(PipeOp::Forward, mine_[tick].forward, p_, v_).chunk;
      ops.push_back({true, &activation, next_, PipelineStage::activation_tag(stage_.virtual_stage(chunk) + 1)});
    }
    if (prevs_[tick].forward >= 0) {
      const int64_t chunk = interleaved_action(PipeOp::Forward, prevs_[tick].forward, p_, v_).chunk;
      if (chunk * p_ + prev_ != last) {  // not the previous stage's loss chunk
        activation_chunk = s_ == 0 ? chunk + 1 : chunk;
        activation_in = torch::empty(act_shape_, act_options_);
        const int tag = PipelineStage::activation_tag(stage_.virtual_stage(activation_chunk));
        ops.push_back({false, &activation_in, prev_, tag});
      }
    }
    if (gradient.defined()) {
      const int64_t chunk = interleaved_action(PipeOp::Backward, mine_[tick].backward, p_, v_).chunk;
      ops.push_back({true, &gradient, prev_, PipelineStage::gradient_tag(stage_.virtual_stage(chunk) - 1)});
    }
    if (nexts_[tick].backward >= 0) {
      const int64_t chunk = interleaved_action(PipeOp::Backward, nexts_[tick].backward, p_, v_).chunk;
      if (chunk * p_ + next_ != 0) {  // not the next stage's token chunk
        gradient_chunk = s_ == p_ - 1 ? chunk - 1 : chunk;
        gradient_in = torch::empty(act_shape_, act_options_);
        const int tag = PipelineStage::gradient_tag(stage_.virtual_stage(gradient_chunk));
        ops.push_back({false, &gradient_in, next_, tag});
      }
    }
    if (ops.empty()) return;
    stage_.stages().exchange(ops);
    if (activation_in.defined()) activations_in_[static_cast<size_t>(activation_chunk)].push_back(activation_in);
    if (gradient_in.defined()) gradients_in_[static_cast<size_t>(gradient_chunk)].push_back(gradient_in);
  }

  PipelineStage& stage_;
  const torch::Tensor& x_NT_;
  const torch::Tensor& y_NT_;
  int64_t micro_batch_, micro_batches_;
  const PipelineStepHooks& hooks_;
  StepMetrics& m_;
  int64_t p_, v_, s_;
  int prev_, next_;
  torch::TensorOptions act_options_;
  std::vector<int64_t> act_shape_;
  std::vector<PipelineTick> mine_, prevs_, nexts_;  // this stage's ticks and its neighbours'
  std::vector<std::deque<torch::Tensor>> activations_in_, gradients_in_;  // received, per chunk, in use order
  std::vector<std::deque<Pending>> pending_;  // per chunk: forwards waiting for their backward
  double loss_sum_ = 0;
};

}  // namespace

double run_interleaved_in_ticks(PipelineStage& stage, const torch::Tensor& x_NT, const torch::Tensor& y_NT,
                                int64_t micro_batch, int64_t micro_batches, torch::Device device,
                                const PipelineStepHooks& hooks, StepMetrics& m) {
  const double loss_sum = TickedStep(stage, x_NT, y_NT, micro_batch, micro_batches, device, hooks, m).run();
  return pipeline_mean_loss(stage, loss_sum, micro_batches, device);
}

}  // namespace hwt
