// Trainer::probe_micro_batch (optimization.auto_batch_size; train/batch_size_probe.h): probe steps of
// decreasing micro-batches on rows of the right shape, each step's memory measured as the planner's
// memory model estimates it, then the largest that fits the budget kept.
#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/obs/memory_meter.h"
#include "hwtrain/model/rng_state.h"
#include "hwtrain/train/trainer.h"

namespace hwt {

BatchProbeResult Trainer::probe_micro_batch() {
  if (optimizer_in_backward()) {
    throw ConfigError("optimization.auto_batch_size cannot run with the optimizer in backward");
  }
  const int64_t per_rank = micro_batch_size_ * grad_accum_steps_;
  const auto candidates = micro_batch_candidates(per_rank, options_.max_batch_size);
  // Rows of the right shape whose values do not matter; the training stream stays untouched.
  const Batch rows = data_->probe_batch(candidates.back(), static_cast<uint64_t>(options_.train.seed));
  const torch::Tensor& x_NT = rows.x_BT;
  const torch::Tensor& y_NT = rows.y_BT;
  const RngState rng_at_start = rng_state(device_);
  const int cuda_index = device_.is_cuda() ? device_.index() : -1;
  // A step's memory: its growth of the resident set (CPU) plus the weights and moments resident already
  // (deferred ones made now), of which a ZeRO-1 rank keeps 1/N once its sharding is attached.
  optimizer_->set_owned({});
  const double moments = static_cast<double>(optimizer_->state_bytes());
  const double unowned = plan_.sharding == Sharding::None ? 0.0 : moments * (world_size_ - 1) / world_size_;
  const double unowned_on_device = optimizer_->options().host_state ? 0.0 : unowned;  // offloaded: host memory
  double state_bytes = moments - unowned;
  for (const auto& p : model_->module().parameters()) state_bytes += static_cast<double>(p.numel() * p.element_size());
  auto probe = [&](int64_t micro) {
    ProbeRecord rec;
    rec.micro_batch_size = micro;
    optimizer_->zero_grad();
    release_free_host_memory();
    if (cuda_index >= 0) reset_device_peak(cuda_index);
    const double rss_before = process_rss_bytes();
    reset_process_peak_rss();
    try {
      auto loss = forward_loss(x_NT.narrow(0, 0, micro).to(device_), y_NT.narrow(0, 0, micro).to(device_));
      precision_->scaler().scale(loss).backward();
      optimizer_->step(0.0);  // allocates what a real step does; at learning rate 0 no weight moves
    } catch (const std::exception& e) {
      if (!is_oom(e)) throw;
      rec.note = "out of memory";
    }
    optimizer_->zero_grad();
    rec.peak_bytes = cuda_index >= 0 ? device_memory(cuda_index).peak_bytes - unowned_on_device
                                     : process_peak_rss_bytes() - rss_before + state_bytes;
    rec.fits = rec.note.empty() && rec.peak_bytes <= plan_.memory_budget_bytes;
    return rec;
  };
  BatchProbeResult r = search_micro_batch(candidates, probe);
  optimizer_->reset_state();
  set_rng_state(rng_at_start, device_);
  micro_batch_size_ = r.micro_batch_size;
  grad_accum_steps_ = per_rank / micro_batch_size_;
  log_info("auto batch size ({}):\n{}; {} accumulation steps keep {} sequences per rank and step",
           cuda_index >= 0 ? "peak CUDA memory" : "resident memory a step adds, plus weights and optimizer state",
           r.describe(plan_.memory_budget_bytes), grad_accum_steps_, per_rank);
  return r;
}

}  // namespace hwt
