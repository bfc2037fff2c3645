// AdamW's host_state step (optimization.optimizer_state_device = cpu; adamw.h): the moments and an
// fp32 master of each parameter in host memory, as ZeRO-Offload keeps them. One step:
//   1. each owned parameter with a gradient: its master re-read if the parameter was written since
//      the master was last copied into it (its version counter moved), and its gradient copied into
//      a host staging buffer (pinned and asynchronous when the parameter is on a GPU; one
//      synchronization waits for all of them);
//   2. AdamW::update on the masters, the same kernels as on the device (ATen's fused AdamW on CPU
//      is vectorized and splits the elements over the intra-op threads);
//   3. each master copied back into its parameter (asynchronously from pinned memory on a GPU: the
//      next step's synchronization comes before the master is written again).
#include <torch/cuda.h>

#include "hwtrain/train/adamw.h"

namespace hwt {

void AdamW::stage_on_host(Slot& s) {
  const bool gpu = s.param.is_cuda();
  if (!s.host.defined()) {
    const auto host = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCPU).pinned_memory(gpu);
    s.host = torch::empty(s.param.sizes(), host);
    s.host_grad = torch::empty(s.param.sizes(), host);
  }
  if (s.param._version() != s.host_version) {
    s.host.copy_(s.param);
    ++master_reads_;
  }
  s.host_grad.copy_(s.param.grad(), /*non_blocking=*/gpu);
}

void AdamW::copy_back_from_host(Slot& s) { s.param.copy_(s.host, /*non_blocking=*/s.param.is_cuda()); }

void AdamW::step_on_host(double lr, const torch::Tensor& grad_scale, const torch::Tensor& found_inf) {
  bool gpu = false;
  std::vector<Slot*> staged;
  for (auto& s : slots_) {
    if (!s.owned || !s.param.grad().defined()) continue;
    stage_on_host(s);
    gpu = gpu || s.param.is_cuda();
    staged.push_back(&s);
  }
  if (staged.empty()) return;
  if (gpu) torch::cuda::synchronize();
  auto on_host = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kCPU) : t; };
  update(lr, on_host(grad_scale), on_host(found_inf), /*on_host=*/true);
  for (Slot* s : staged) copy_back_from_host(*s);
  // Versions read after every copy: ZeRO's segments are views of one flat shard and share its
  // counter, which each segment's copy moves (read per copy, all but the last were stale next step
  // and re-read their master from the device).
  for (Slot* s : staged) s->host_version = s->param._version();
}

int64_t AdamW::device_state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : slots_) {
    if (s.owned && !options_.host_state) bytes += state_bytes_of(s);
  }
  return bytes;
}

int64_t AdamW::host_state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : slots_) {
    if (!s.owned || !options_.host_state) continue;
    bytes += state_bytes_of(s);
    for (const auto* t : {&s.host, &s.host_grad}) {
      if (t->defined()) bytes += t->numel() * static_cast<int64_t>(t->element_size());
    }
  }
  return bytes;
}

}  // namespace hwt
