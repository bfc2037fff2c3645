// ShardedParameters' gradient side (dist/sharded_parameters.h): the reduce-scatters started from the
// autograd hooks, at most two in flight, folded into each unit's fp32 gradient shard as they finish.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "hwtrain/dist/sharded_parameters.h"
#include "hwtrain/dist/sharded_unit.h"
#include "hwtrain/dist/work_group.h"

namespace hwt {

namespace {
// Reductions in flight at most: launching one more first waits for the oldest (FSDP keeps one
// reduce-scatter pending beside the one being issued).
constexpr size_t kReductionsInFlight = 2;
// Where the reduce-scatter is an all-reduce, gradients of at least this many elements are reduced
// where they are; the smaller ones of a unit are packed into one buffer (fewer collectives).
constexpr int64_t kInPlaceElements = int64_t{1} << 16;

// This rank's fp32 shard [rank x shard, (rank + 1) x shard) of a unit's flat layout, from the reduced
// pieces (offset in the layout, elements); zeros where no piece lies (padding, gradients never made).
torch::Tensor shard_of_pieces(const std::vector<std::pair<int64_t, torch::Tensor>>& pieces, int rank,
                              int64_t shard, const torch::TensorOptions& options) {
  torch::Tensor out = torch::zeros({shard}, options.dtype(torch::kFloat));
  const int64_t lo = rank * shard, hi = lo + shard;
  for (const auto& [offset, t] : pieces) {
    const int64_t a = std::max(lo, offset), b = std::min(hi, offset + t.numel());
    if (a < b) out.narrow(0, a - lo, b - a).copy_(t.narrow(0, a - offset, b - a));
  }
  return out;
}
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
  if (any && group_->reduces_by_all_reduce(u.master)) {
    start_all_reduce(u);
  } else if (any) {
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
  Reduction r;
  r.unit = &u;
  r.input = std::move(input);
  r.work = group_->reduce_scatter_in_place(r.input, r.output);
  r.bytes = (r.input.numel() + (r.output_views_input() ? 0 : r.output.numel())) * r.input.element_size();
  const int64_t sent = r.input.numel() * r.input.element_size();
  add_reduction(std::move(r), sent);
}

// A started reduction joins those in flight: timed, counted, and the finished ones folded.
void ShardedParameters::add_reduction(Reduction r, int64_t sent_bytes) {
  track(r.work);
  ++stats_.reduce_scatters;
  stats_.reduced_bytes += sent_bytes;
  reductions_.push_back(std::move(r));
  stats_.peak_reducing_bytes = std::max(stats_.peak_reducing_bytes, reducing_bytes());
  reap(kReductionsInFlight);  // only those already finished
}

// Gloo on the CPU, whose reduce-scatter is an all-reduce of a whole buffer: the unit's large
// gradients are averaged and all-reduced where they are, the small ones packed into one buffer, so
// no whole-unit copy exists beside them (the tied rest's: 148 MiB for GPT-2 124M). Each element is
// the same sum of the same averaged terms as in the packed form: bit-identical over two ranks; over
// more Gloo may add them in another order.
void ShardedParameters::start_all_reduce(Unit& u) {
  reap(kReductionsInFlight - 1);  // room for this one
  const c10::ScalarType dtype = options_.reduce_dtype;
  const double n = static_cast<double>(group_->world_size());
  Reduction r;
  r.unit = &u;
  std::vector<ProcessGroup::WorkPtr> works;
  std::vector<size_t> packed;
  int64_t packed_numel = 0;
  // Which gradients go alone is decided from the parameters alone, the same on every rank; a missing
  // gradient is reduced as zeros, as in the packed form.
  for (size_t i = 0; i < u.params.size(); ++i) {
    const torch::Tensor& p = u.params[i];
    if (p.scalar_type() != dtype || !p.is_contiguous() || p.numel() < kInPlaceElements) {
      packed.push_back(i);
      packed_numel += p.numel();
      continue;
    }
    const torch::Tensor g = p.grad();
    torch::Tensor flat;
    if (!g.defined()) {
      flat = torch::zeros({p.numel()}, p.options().dtype(dtype));
    } else if (g.is_contiguous() && g.scalar_type() == dtype) {
      flat = g.view({-1});
    } else {
      flat = g.reshape({-1}).to(dtype).contiguous();
    }
    flat.div_(n);
    works.push_back(group_->all_reduce_sum(flat));
    r.pieces.emplace_back(u.offsets[i], flat);
    r.bytes += flat.numel() * flat.element_size();
  }
  if (!packed.empty()) {
    torch::Tensor buffer = torch::zeros({packed_numel}, u.master.options().dtype(dtype));
    int64_t at = 0;
    for (const size_t i : packed) {
      const torch::Tensor g = u.params[i].grad();
      torch::Tensor piece = buffer.narrow(0, at, u.params[i].numel());
      if (g.defined()) piece.copy_(g.reshape(-1));
      r.pieces.emplace_back(u.offsets[i], piece);
      at += piece.numel();
    }
    buffer.div_(n);
    works.push_back(group_->all_reduce_sum(buffer));
    r.bytes += buffer.numel() * buffer.element_size();
  }
  for (auto& p : u.params) p.mutable_grad() = torch::Tensor();  // the pieces hold what is reduced
  r.work = c10::make_intrusive<WorkGroup>(std::move(works));
  const int64_t sent = r.bytes;
  add_reduction(std::move(r), sent);
}

int64_t ShardedParameters::reducing_bytes() const {
  int64_t b = 0;
  for (const auto& r : reductions_) b += r.bytes;
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
    torch::Tensor shard =
        r.pieces.empty() ? r.output.to(torch::kFloat, /*non_blocking=*/false, /*copy=*/r.output_views_input())
                         : shard_of_pieces(r.pieces, group_->rank(), r.unit->shard, r.unit->master.options());
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
      wait(r.work, "reduce-scattering the gradients of " + r.unit->name);  // closes its timing flight too
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
