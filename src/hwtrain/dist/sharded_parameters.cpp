#include "hwtrain/dist/sharded_parameters.h"

#include <atomic>
#include <chrono>
#include <map>
#include <stdexcept>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/dist/comm_spans.h"
#include "hwtrain/dist/ddp.h"
#include "hwtrain/dist/sharded_unit.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace {

using Clock = std::chrono::steady_clock;

// Releases a buffer's memory while every view of it (the parameters, what autograd saved) stays
// valid as an object; allocate_storage gives it memory of its size again (contents undefined).
void free_storage(const torch::Tensor& flat) {
  c10::StorageImpl* s = flat.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, flat.device()));
  s->set_nbytes(0);
}

void allocate_storage(const torch::Tensor& flat) {
  if (flat.storage().nbytes() > 0) return;
  c10::StorageImpl* s = flat.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(flat.numel()) * flat.element_size();
  s->set_data_ptr_noswap(s->allocator()->allocate(bytes));
  s->set_nbytes(bytes);
}

bool has_storage(const torch::Tensor& flat) { return flat.storage().nbytes() > 0; }

}  // namespace

const char* shard_stage_name(ShardStage s) { return s == ShardStage::Zero2 ? "zero2" : "zero3"; }

// A collective's span, for the communication time. It names its work by address only: holding the
// work would keep its tensors (a unit's whole reduce buffer, on Gloo) alive until after_step.
struct ShardedParameters::Flight {
  const c10d::Work* work;
  int64_t launched_ns;
  std::shared_ptr<std::atomic<int64_t>> done_ns;  // set by the backend's callback (or after its wait)
};

// A unit's parameters, flattened into one fp32 buffer of `padded` elements on their device: copied,
// or for a deferred model's placeholders, their initial values written unit by unit (on the CPU,
// where the ordinary build draws them too).
torch::Tensor ShardedParameters::whole_values(const Unit& u, const InitialValue& initial_value, int64_t padded) {
  const torch::Device device = u.params.front().device();
  torch::Tensor full = torch::zeros({padded}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  for (size_t i = 0; i < u.params.size(); ++i) {
    const torch::Tensor& p = u.params[i];
    torch::Tensor view = full.narrow(0, u.offsets[i], p.numel()).view(u.shapes[i]);
    if (!is_placeholder(p)) {
      view.copy_(p.detach());
      continue;
    }
    if (!initial_value) {
      throw std::logic_error("sharding: parameter '" + u.names[i] + "' is a placeholder without an initial value");
    }
    if (device.is_cpu()) {
      initial_value(p, view);
    } else {
      torch::Tensor host = torch::empty(u.shapes[i], torch::kFloat);
      initial_value(p, host);
      view.copy_(host);
    }
  }
  return full;
}

ShardedParameters::ShardedParameters(std::shared_ptr<ProcessGroup> group, std::vector<ShardedUnitParams> units,
                                     ShardingOptions options)
    : group_(std::move(group)), options_(options) {
  torch::NoGradGuard no_grad;
  const int64_t n = group_->world_size(), rank = group_->rank();
  for (auto& spec : units) {
    auto u = std::make_unique<Unit>();
    u->name = spec.name;
    for (auto& [name, p] : spec.params) {
      if (!p.requires_grad() || !p.is_leaf()) {
        throw ConfigError("sharding: parameter '" + name + "' must be a leaf that requires a gradient");
      }
      u->names.push_back(name);
      u->params.push_back(p);
      u->shapes.push_back(p.sizes().vec());
      u->offsets.push_back(u->numel);
      u->numel += p.numel();
    }
    if (u->params.empty()) continue;
    u->shard = (u->numel + n - 1) / n;
    torch::Tensor full = whole_values(*u, spec.initial_value, u->shard * n);
    if (options_.broadcast_parameters) broadcast_tensors(*group_, {full}, 0, "broadcasting unit " + u->name);
    u->master = full.narrow(0, rank * u->shard, u->shard).clone();
    u->flat = full.to(options_.compute_dtype);  // full itself when fp32: nothing else holds it
    for (size_t i = 0; i < u->params.size(); ++i) {
      u->params[i].mutable_grad() = torch::Tensor();
      u->params[i].set_data(u->flat.narrow(0, u->offsets[i], u->params[i].numel()).view(u->shapes[i]));
    }
    // This rank's segments: each parameter's overlap with [rank x shard, (rank + 1) x shard).
    const int64_t lo = rank * u->shard, hi = lo + u->shard;
    for (size_t i = 0; i < u->params.size(); ++i) {
      const int64_t a = std::max(lo, u->offsets[i]), b = std::min(hi, u->offsets[i] + u->params[i].numel());
      if (a >= b) continue;
      u->segments.emplace_back(segments_.size(), a - lo);
      segments_.push_back({u->names[i], a - u->offsets[i], u->master.narrow(0, a - lo, b - a)});
    }
    u->pending = u->params.size();
    // ZeRO-3 frees each unit's buffer before the next is made: at most one unit whole at a time.
    if (options_.stage == ShardStage::Zero3) reshard(*u);
    units_.push_back(std::move(u));
  }
  for (size_t k = 0; k < units_.size(); ++k) {
    for (size_t i = 0; i < units_[k]->params.size(); ++i) {
      hooks_.emplace_back(units_[k]->params[i], [this, k] { on_gradient_ready(k); }, "sharding: " + units_[k]->names[i]);
    }
  }
  log_info("{}", describe());
}

ShardedParameters::~ShardedParameters() {
  hooks_.clear();
  alive_.reset();  // a backward hook (release_after_backward) running now does nothing
  // No collective may outlive the buffers it writes.
  for (auto& r : reductions_) {
    try {
      r.work->wait();
    } catch (const std::exception&) {
    }
  }
  for (auto& u : units_) {
    try {
      if (u->gather_work) u->gather_work->wait();
    } catch (const std::exception&) {
    }
  }
}

void ShardedParameters::wait(const ProcessGroup::WorkPtr& work, const std::string& what) {
  const auto t0 = Clock::now();
  group_->wait(work, what);
  stats_.wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  const int64_t done = steady_now_ns();
  for (auto& f : flights_) {  // a backend without futures: done when its wait returned
    int64_t unset = 0;
    if (f.work == work.get()) f.done_ns->compare_exchange_strong(unset, done);
  }
}

void ShardedParameters::track(const ProcessGroup::WorkPtr& work) {
  Flight f{work.get(), steady_now_ns(), std::make_shared<std::atomic<int64_t>>(0)};
  auto done = f.done_ns;
  try {
    work->getFuture()->addCallback([done](c10::ivalue::Future&) { done->store(steady_now_ns()); });
  } catch (const c10::Error&) {
  }
  flights_.push_back(std::move(f));
}

void ShardedParameters::count_flights() {
  std::vector<std::pair<int64_t, int64_t>> spans;
  std::vector<Flight> open;
  for (auto& f : flights_) {
    const int64_t done = f.done_ns->load();
    if (done == 0) {
      open.push_back(std::move(f));
    } else {
      spans.emplace_back(f.launched_ns, std::max(done, f.launched_ns));
    }
  }
  flights_ = std::move(open);
  stats_.comm_seconds += static_cast<double>(cover_spans(std::move(spans), 0).covered_ns) * 1e-9;
}

void ShardedParameters::launch_gather(Unit& u) {
  if (u.state != Unit::State::Sharded) return;
  allocate_storage(u.flat);
  u.gather_input = u.master.to(options_.compute_dtype);  // the master itself when fp32
  u.gather_work = group_->all_gather_into(u.flat, u.gather_input);
  track(u.gather_work);
  u.state = Unit::State::Gathering;
  ++stats_.all_gathers;
  stats_.gathered_bytes += u.flat.numel() * u.flat.element_size();
  stats_.peak_gathered_bytes = std::max(stats_.peak_gathered_bytes, gathered_bytes());
}

void ShardedParameters::ensure_gathered(size_t unit) {
  Unit& u = *units_.at(unit);
  launch_gather(u);
  if (u.state == Unit::State::Gathering) {
    wait(u.gather_work, "all-gathering the parameters of " + u.name);
    u.gather_work.reset();
    u.gather_input = torch::Tensor();
    u.state = Unit::State::Gathered;
  }
}

void ShardedParameters::reshard(Unit& u) {
  if (u.state == Unit::State::Gathering) {  // never free a buffer a collective is writing
    wait(u.gather_work, "all-gathering the parameters of " + u.name);
    u.gather_work.reset();
    u.gather_input = torch::Tensor();
  }
  if (has_storage(u.flat)) free_storage(u.flat);
  u.state = Unit::State::Sharded;
}

void ShardedParameters::before_forward(size_t unit) {
  if (options_.stage != ShardStage::Zero3) return;
  ensure_gathered(unit);
  // In backward a checkpointed block's recomputation calls this too: its next unit is done then.
  if (!options_.prefetch || in_backward_) return;
  if (unit + 1 < units_.size()) {
    launch_gather(*units_[unit + 1]);
  } else if (reused_ < units_.size()) {  // the last unit runs before the one used again (the tied head)
    launch_gather(*units_[reused_]);
  }
}

torch::Tensor ShardedParameters::after_forward(size_t unit, const torch::Tensor& out) {
  if (options_.stage != ShardStage::Zero3) return out;
  if (torch::GradMode::is_enabled() && out.requires_grad()) {
    // The unit's backward starts when the gradient of its output arrives: gather it (and the unit
    // before it, which backward reaches next) just before.
    out.register_hook([this, unit](const torch::Tensor& grad) {
      in_backward_ = true;
      ensure_gathered(unit);
      if (options_.prefetch && unit > 0 && !units_[unit - 1]->released) launch_gather(*units_[unit - 1]);
      return grad;
    });
  }
  units_[unit]->released = false;
  reshard(*units_[unit]);
  return out;
}

void ShardedParameters::release(size_t unit) {
  if (options_.stage != ShardStage::Zero3) return;
  units_.at(unit)->released = true;
  reshard(*units_[unit]);
}

torch::Tensor ShardedParameters::gather_for_backward(size_t unit, const torch::Tensor& out) {
  if (options_.stage != ShardStage::Zero3 || !torch::GradMode::is_enabled() || !out.requires_grad()) return out;
  out.register_hook([this, unit](const torch::Tensor& grad) {
    in_backward_ = true;
    ensure_gathered(unit);
    return grad;
  });
  return out;
}

void ShardedParameters::before_reuse(size_t unit) {
  if (options_.stage != ShardStage::Zero3) return;
  reused_ = unit;  // from the next forward on, the last unit prefetches it
  ensure_gathered(unit);
}

torch::Tensor ShardedParameters::release_after_backward(size_t unit, const torch::Tensor& in) {
  if (options_.stage != ShardStage::Zero3 || !torch::GradMode::is_enabled() || !in.requires_grad()) return in;
  // On an alias of `in`: its hook runs before those already on `in` (the unit before's gather
  // for backward), so the two are not held at once.
  torch::Tensor alias = in.view_as(in);
  std::weak_ptr<int> alive = alive_;
  alias.register_hook([this, alive, unit](const torch::Tensor& grad) {
    if (alive.lock()) {
      units_[unit]->released = true;
      reshard(*units_[unit]);
    }
    return grad;
  });
  return alias;
}

void ShardedParameters::after_step() {
  if (options_.stage == ShardStage::Zero3) {
    for (auto& u : units_) reshard(*u);
  } else {
    for (auto& u : units_) {
      u->state = Unit::State::Sharded;  // stale: refilled from the updated masters, in the storage it has
      launch_gather(*u);
    }
    gather_all();
  }
  count_flights();
}

void ShardedParameters::gather_all() {
  for (size_t k = 0; k < units_.size(); ++k) ensure_gathered(k);
}

torch::Tensor ShardedParameters::global_norm(const torch::Tensor& local_norm) {
  torch::Tensor sq = (local_norm.to(torch::kFloat) * local_norm.to(torch::kFloat)).reshape({1}).contiguous();
  wait(group_->all_reduce_sum(sq), "summing the gradient norm over the ranks");
  return sq.sqrt().reshape({});
}

void ShardedParameters::sum_across_ranks(torch::Tensor& t) {
  wait(group_->all_reduce_sum(t), "summing a verdict over the ranks");
}

int64_t ShardedParameters::master_bytes() const {
  int64_t b = 0;
  for (const auto& u : units_) b += u->master.numel() * u->master.element_size();
  return b;
}

int64_t ShardedParameters::gathered_bytes() const {
  int64_t b = 0;
  for (const auto& u : units_) b += static_cast<int64_t>(u->flat.storage().nbytes());
  return b;
}

std::string ShardedParameters::describe() const {
  int64_t numel = 0, largest = 0;
  for (const auto& u : units_) {
    numel += u->numel;
    largest = std::max<int64_t>(largest, u->numel);
  }
  const double elt = static_cast<double>(c10::elementSize(options_.compute_dtype));
  return std::string(shard_stage_name(options_.stage)) + ": " + std::to_string(units_.size()) + " units over " +
         std::to_string(group_->world_size()) + " ranks; per rank: fp32 master shard " +
         format_bytes(static_cast<double>(master_bytes())) + ", AdamW moments " +
         format_bytes(2.0 * static_cast<double>(master_bytes())) + ", gradient shard " +
         format_bytes(static_cast<double>(master_bytes())) + ", " +
         (options_.compute_dtype == torch::kBFloat16 ? "bf16"
          : options_.compute_dtype == torch::kHalf   ? "fp16"
                                                     : "fp32") +
         " parameters " +
         (options_.stage == ShardStage::Zero2
              ? format_bytes(elt * static_cast<double>(numel)) + " (whole)"
              : "gathered a unit at a time (largest " + format_bytes(elt * static_cast<double>(largest)) + ")");
}

}  // namespace hwt
