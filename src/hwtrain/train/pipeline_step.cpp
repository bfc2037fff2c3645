#include "hwtrain/train/pipeline_step.h"

#include <algorithm>

#include "hwtrain/core/clock.h"
#include "hwtrain/core/error.h"
#include "hwtrain/train/pipeline_ticks.h"

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

PipeAction interleaved_action(PipeOp op, int64_t k, int64_t stages, int64_t chunks) {
  const int64_t chunk = (k % (stages * chunks)) / stages;
  return {op, (k / (stages * chunks)) * stages + k % stages, op == PipeOp::Forward ? chunk : chunks - 1 - chunk};
}

std::vector<PipeAction> interleaved_one_f_one_b(int64_t stage, int64_t stages, int64_t chunks, int64_t micro_batches) {
  if (micro_batches % stages != 0) {
    throw ConfigError("train.grad_accum_steps = " + std::to_string(micro_batches) + " micro-batches cannot be " +
                      "interleaved over dist.pipeline_parallel = " + std::to_string(stages) + " stages of " +
                      "dist.pipeline_chunks = " + std::to_string(chunks) + " chunks: it must be a multiple of " +
                      std::to_string(stages));
  }
  const int64_t total = micro_batches * chunks;
  const auto action = [&](PipeOp op, int64_t k) { return interleaved_action(op, k, stages, chunks); };
  const int64_t warmup = micro_batches == stages ? total : std::min(total, 2 * (stages - stage - 1) + (chunks - 1) * stages);
  std::vector<PipeAction> out;
  for (int64_t k = 0; k < warmup; ++k) out.push_back(action(PipeOp::Forward, k));
  for (int64_t k = 0; k < total - warmup; ++k) {
    out.push_back(action(PipeOp::Forward, warmup + k));
    out.push_back(action(PipeOp::Backward, k));
  }
  for (int64_t k = total - warmup; k < total; ++k) out.push_back(action(PipeOp::Backward, k));
  return out;
}

std::vector<PipeAction> pipeline_schedule(int64_t stage, int64_t stages, int64_t chunks, int64_t micro_batches) {
  return chunks == 1 ? one_f_one_b(stage, stages, micro_batches)
                     : interleaved_one_f_one_b(stage, stages, chunks, micro_batches);
}

namespace {

// For each micro-batch k of stage s (1F1B): the micro-batches whose gradients it sent to the previous
// stage that are received once k's activation has arrived from it. The previous stage sends that
// activation in a forward that its schedule runs after the backwards that received those gradients,
// so waiting for their sends then cannot block (nor wait on any peer).
std::vector<std::vector<size_t>> gradient_sends_done_by(int64_t s, int64_t p, int64_t micro_batches) {
  std::vector<std::vector<size_t>> done(static_cast<size_t>(micro_batches));
  if (s == 0) return done;  // the first stage sends no gradients
  std::vector<size_t> received;  // our gradients the previous stage has received so far
  for (const PipeAction& a : one_f_one_b(s - 1, p, micro_batches)) {
    if (a.op == PipeOp::Backward) {
      received.push_back(static_cast<size_t>(a.micro));
    } else {
      done[static_cast<size_t>(a.micro)] = std::move(received);
      received.clear();
    }
  }
  return done;
}

// A stage's sends and receives in schedule order, each send held until the next action: if that
// action first receives from the same peer, the two are issued as one group (send_and_recv), as
// Megatron-LM's send_forward_recv_backward and send_backward_recv_forward do. Where a send waits
// for its receive in the order each rank issued them (NCCL), two neighbours that each sent before
// receiving from the other would wait forever (support/in_order_comm.h shows it); over Gloo the
// group is the send and the receive in turn.
class Line {
 public:
  explicit Line(TensorParallelComm& comm) : comm_(comm) {}
  // `wait` receives the function that waits for the send (it must outlive the step).
  void send(const torch::Tensor& t, int peer, int tag, std::function<void()>& wait) {
    flush();
    held_ = {t, peer, tag, &wait};
  }
  void recv(torch::Tensor& t, int peer, int tag) {
    if (held_.wait && held_.peer == peer) {
      *held_.wait = comm_.send_and_recv(held_.tensor, held_.peer, held_.tag, t, peer, tag);
      held_ = Held();
      return;
    }
    flush();
    comm_.recv(t, peer, tag);
  }
  void flush() {
    if (!held_.wait) return;
    *held_.wait = comm_.send_async(held_.tensor, held_.peer, held_.tag);
    held_ = Held();
  }

 private:
  struct Held {
    torch::Tensor tensor;
    int peer = -1, tag = 0;
    std::function<void()>* wait = nullptr;
  };
  TensorParallelComm& comm_;
  Held held_;
};

void wait_once(std::function<void()>& send) {
  if (!send) return;
  send();
  send = nullptr;  // frees the sent tensor
}

}  // namespace

double pipeline_mean_loss(PipelineStage& stage, double loss_sum, int64_t micro_batches, torch::Device device) {
  torch::Tensor loss = torch::full({1}, stage.is_last() ? loss_sum : 0.0, torch::dtype(torch::kFloat64).device(device));
  stage.stages().all_reduce_sum(loss);
  return loss.item<double>() / static_cast<double>(micro_batches);
}

double run_pipeline_step(PipelineStage& stage, const torch::Tensor& x_NT, const torch::Tensor& y_NT,
                         int64_t micro_batch, int64_t micro_batches, torch::Device device,
                         const PipelineStepHooks& hooks, StepMetrics& m) {
  TensorParallelComm& stages = stage.stages();
  if (stage.chunk_count() > 1) {
    return run_interleaved_in_ticks(stage, x_NT, y_NT, micro_batch, micro_batches, device, hooks, m);
  }
  const int64_t p = stage.stage_count();
  const int s = static_cast<int>(stage.stage_index());
  const int prev = s - 1, next = s + 1;
  const auto act_options = torch::TensorOptions().dtype(torch::kFloat).device(device);
  const std::vector<int64_t> act_shape = stage.activation_shape(micro_batch, x_NT.size(1));
  const std::vector<PipeAction> schedule = one_f_one_b(s, p, micro_batches);
  std::vector<torch::Tensor> inputs(static_cast<size_t>(micro_batches)), outputs(inputs.size());
  // Sends in flight, by micro-batch: each waited for (and its tensor freed) as soon as its receipt
  // is certain: an activation's when its gradient comes back, a gradient's by gradient_sends_done_by;
  // the rest at the end of the step. Holding them all to the end kept every micro-batch's boundary
  // activation and gradient alive through the step.
  std::vector<std::function<void()>> activation_sends(inputs.size()), gradient_sends(inputs.size());
  const std::vector<std::vector<size_t>> gradients_done_by = gradient_sends_done_by(s, p, micro_batches);
  Line line(stages);
  double loss_sum = 0;
  for (size_t i = 0; i < schedule.size(); ++i) {
    const PipeAction& a = schedule[i];
    const size_t k = static_cast<size_t>(a.micro);
    const bool receives = a.op == PipeOp::Forward ? !stage.is_first() : !stage.is_last();
    if (!receives) line.flush();  // nothing to group the held send with: on its way before this compute
    if (a.op == PipeOp::Forward) {
      const auto y = y_NT.narrow(0, a.micro * micro_batch, micro_batch).to(device, /*non_blocking=*/true);
      torch::Tensor in;
      if (stage.is_first()) {
        in = x_NT.narrow(0, a.micro * micro_batch, micro_batch).to(device, /*non_blocking=*/true);
      } else {
        in = torch::empty(act_shape, act_options);
        line.recv(in, prev, PipelineStage::activation_tag(s));
        in.requires_grad_(true);
        for (const size_t done : gradients_done_by[k]) wait_once(gradient_sends[done]);
      }
      const auto t0 = Clock::now();
      torch::Tensor out = hooks.forward(in, y, 0);
      m.forward_seconds += seconds_since(t0);
      if (stage.is_last()) {
        loss_sum += out.detach().item<double>();
      } else {
        line.send(out.detach().to(torch::kFloat).contiguous(), next, PipelineStage::activation_tag(s + 1),
                  activation_sends[k]);
      }
      inputs[k] = in;
      outputs[k] = out;
      continue;
    }
    torch::Tensor grad;
    if (!stage.is_last()) {  // first: the held send goes with it, not after the hook's waits
      grad = torch::empty(act_shape, act_options);
      line.recv(grad, next, PipelineStage::gradient_tag(s));
      wait_once(activation_sends[k]);  // the next stage's backward of k ran: it had received it
    }
    hooks.before_backward(i + 1 == schedule.size());
    const auto t1 = Clock::now();  // compute only: the time waiting for the next stage is the bubble's
    if (stage.is_last()) {
      hooks.backward_loss(outputs[k]);
    } else {
      torch::autograd::backward({outputs[k]}, {grad.to(outputs[k].scalar_type())});
    }
    m.backward_seconds += seconds_since(t1);
    if (!stage.is_first()) {
      line.send(inputs[k].grad().to(torch::kFloat).contiguous(), prev, PipelineStage::gradient_tag(s - 1),
                gradient_sends[k]);
    }
    inputs[k] = outputs[k] = torch::Tensor();  // this micro-batch's activations are freed
  }
  line.flush();
  for (auto& send : activation_sends) wait_once(send);
  for (auto& send : gradient_sends) wait_once(send);
  return pipeline_mean_loss(stage, loss_sum, micro_batches, device);
}

}  // namespace hwt
