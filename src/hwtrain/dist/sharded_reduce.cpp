// ShardedParameters' gradient side (dist/sharded_parameters.h): the reduce-scatters started from the
// autograd hooks, at most two in flight, folded into each unit's fp32 gradient shard as they finish.
#include <algorithm>
#include <memory>
#include <stdexcept>

#include "hwtrain/dist/sharded_parameters.h"
#include "hwtrain/dist/sharded_unit.h"

namespace hwt {

namespace {
// Reductions in flight at most: launching one more first waits for the oldest (FSDP keeps one
// reduce-scatter pending beside the one being issued).
constexpr size_t kReductionsInFlight = 2;
}  // namespace

void ShardedParameters::on_gradient_ready(size_t unit) {
  Unit& u = *units_[unit];
  if (u.pending > 0 && --u.pending == 0) launch_reduce(u);
}

// The unit's gradients, flattened in the reduce dtype and divided by the world size, reduce-
// scattered; the parameters' own gradients are freed, and under ZeRO-3 the unit's buffer too. A
// unit none of whose parameters got a gradient sends nothing: every rank runs the same graph, so
// every rank skips it.
void ShardedParameters::launch_reduce(Unit& u) {
  if (u.reduce_launched) return;
  torch::NoGradGuard no_grad;
  u.reduce_launched = true;
  const bool any = std::any_of(u.params.begin(), u.params.end(), [](const torch::Tensor& p) { return p.grad().defined(); });
  if (any) {
    torch::Tensor input = torch::zeros({u.shard * group_->world_size()}, u.master.options().dtype(options_.reduce_dtype));
    for (size_t i = 0; i < u.params.size(); ++i) {
      torch::Tensor g = u.params[i].grad();
      if (g.defined()) input.narrow(0, u.offsets[i], g.numel()).copy_(g.reshape(-1));
      u.params[i].mutable_grad() = torch::Tensor();
    }
    start_reduction(u, std::move(input));
  }
  if (options_.stage == ShardStage::Zero3) reshard(u);
}

void ShardedParameters::start_reduction(Unit& u, torch::Tensor input) {
  reap(kReductionsInFlight - 1);  // room for this one
  input.div_(static_cast<double>(group_->world_size()));
  Reduction r{&u, nullptr, std::move(input), torch::Tensor()};
  r.work = group_->reduce_scatter_in_place(r.input, r.output);
  track(r.work);
  ++stats_.reduce_scatters;
  stats_.reduced_bytes += r.input.numel() * r.input.element_size();
  reductions_.push_back(std::move(r));
  stats_.peak_reducing_bytes = std::max(stats_.peak_reducing_bytes, reducing_bytes());
  reap(kReductionsInFlight);  // only those already finished
}

int64_t ShardedParameters::reducing_bytes() const {
  int64_t b = 0;
  for (const auto& r : reductions_) {
    b += (r.input.numel() + (r.output_views_input() ? 0 : r.output.numel())) * r.input.element_size();
  }
  return b;
}

// Folds reductions in launch order (so a unit's shard adds its parts in the same order on every run):
// each finished one at the front, and the oldest, waiting, while more than `keep` are in flight.
void ShardedParameters::reap(size_t keep) {
  torch::NoGradGuard no_grad;
  while (!reductions_.empty()) {
    Reduction r = reductions_.front();
    if (reductions_.size() <= keep && !r.work->isCompleted()) break;
    reductions_.erase(reductions_.begin());  // before the wait: a failed one is not folded again
    wait(r.work, "reduce-scattering the gradients of " + r.unit->name);
    // Kept as it is when it is a fresh fp32 tensor; copied when it views the whole input (Gloo).
    torch::Tensor shard = r.output.to(torch::kFloat, /*non_blocking=*/false, /*copy=*/r.output_views_input());
    if (r.unit->grad.defined()) {
      r.unit->grad.add_(shard);
    } else {
      r.unit->grad = shard;
    }
  }
}

// Waits for the reductions in flight and adds them to the fp32 gradient shards.
void ShardedParameters::collect_reductions() {
  reap(0);
  for (auto& u : units_) {
    u->reduce_launched = false;
    u->pending = u->params.size();
  }
}

void ShardedParameters::begin_micro_step(bool) { collect_reductions(); }

void ShardedParameters::finish() {
  torch::NoGradGuard no_grad;
  for (auto& u : units_) {  // a unit whose backward did not complete counts its missing gradients as zeros
    if (u->pending < u->params.size() && !u->reduce_launched) launch_reduce(*u);
  }
  collect_reductions();
  for (auto& up : units_) {
    Unit& u = *up;
    if (!u.grad.defined()) u.grad = torch::zeros_like(u.master);
    for (const auto& [index, start] : u.segments) {
      segments_[index].master.mutable_grad() = u.grad.narrow(0, start, segments_[index].master.numel());
    }
    u.grad = torch::Tensor();  // the segments hold it until the optimizer's zero_grad
  }
}

std::optional<std::vector<std::pair<std::string, torch::Tensor>>> ShardedParameters::gradient_shards() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& seg : segments_) out.emplace_back(seg.param, seg.master.grad());
  return out;
}

void ShardedParameters::discard() {
  for (auto& r : reductions_) {
    try {
      group_->wait(r.work, "reduce-scattering the gradients of " + r.unit->name);
    } catch (const std::exception&) {
    }
  }
  reductions_.clear();
  for (auto& up : units_) {
    Unit& u = *up;
    u.reduce_launched = false;
    u.grad = torch::Tensor();
    u.pending = u.params.size();
    for (auto& p : u.params) p.mutable_grad() = torch::Tensor();
  }
  for (auto& seg : segments_) seg.master.mutable_grad() = torch::Tensor();
}

}  // namespace hwt
