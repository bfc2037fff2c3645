#include "hwtrain/dist/ddp.h"


#include <algorithm>
#include <map>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/comm_spans.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/obs/log.h"

namespace hwt {

CommStats& CommStats::operator+=(const CommStats& o) {
  syncs += o.syncs;
  buckets += o.buckets;
  bytes += o.bytes;
  comm_seconds += o.comm_seconds;
  hidden_seconds += o.hidden_seconds;
  finish_seconds += o.finish_seconds;
  return *this;
}

// A post hook on a parameter's AccumulateGrad node. The node is owned here: the parameter keeps
// only a weak reference, and a new node (without the hook) would replace a dropped one.
void broadcast_tensors(ProcessGroup& group, const std::vector<torch::Tensor>& tensors, int root,
                       const std::string& what, int64_t bucket_bytes) {
  broadcast_from_owners(tensors, std::vector<int>(tensors.size(), root), group, bucket_bytes, what);
}

DataParallel::DataParallel(std::shared_ptr<ProcessGroup> group, std::vector<torch::Tensor> parameters,
                           DataParallelOptions options)
    : group_(std::move(group)), params_(std::move(parameters)), options_(options) {
  if (options_.bucket_size_mb <= 0) {
    throw ConfigError("dist.bucket_size_mb = " + std::to_string(options_.bucket_size_mb) + " must be positive");
  }
  slots_.resize(params_.size());
  // Buckets in reverse registration order: backward reaches the last layers first. Each bucket
  // holds one dtype and device, so it is one flat buffer.
  const double mb = 1024.0 * 1024.0;
  std::map<std::pair<c10::ScalarType, std::string>, size_t> open;  // (dtype, device) -> bucket
  std::vector<int64_t> bucket_bytes;
  for (size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k];
    if (!p.requires_grad()) continue;
    const auto key = std::make_pair(p.scalar_type(), p.device().str());
    auto it = open.find(key);
    if (it == open.end()) {
      buckets_.emplace_back();
      bucket_bytes.push_back(0);
      it = open.emplace(key, buckets_.size() - 1).first;
    }
    const size_t b = it->second;
    slots_[k].bucket = b;
    slots_[k].offset = bucket_bytes[b] / static_cast<int64_t>(p.element_size());
    buckets_[b].params.push_back(k);
    bucket_bytes[b] += p.numel() * static_cast<int64_t>(p.element_size());
    const double cap = (b == 0 ? std::min(options_.first_bucket_size_mb, options_.bucket_size_mb)
                               : options_.bucket_size_mb) * mb;
    if (static_cast<double>(bucket_bytes[b]) >= cap) open.erase(it);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const torch::Tensor& first = params_[buckets_[b].params.front()];
    buckets_[b].flat = torch::empty({bucket_bytes[b] / static_cast<int64_t>(first.element_size())},
                                    first.options().requires_grad(false));
  }
  done_ns_ = std::make_shared<std::vector<std::atomic<int64_t>>>(buckets_.size());

  if (options_.broadcast_parameters) {
    std::vector<torch::Tensor> trainable;
    for (const auto& p : params_) trainable.push_back(p);
    broadcast_tensors(*group_, trainable, 0, "broadcasting the initial parameters",
                      static_cast<int64_t>(options_.bucket_size_mb * 1024.0 * 1024.0));
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    hooks_.emplace_back(params_[k], [this, k] { on_gradient_ready(k); },
                        "DataParallel: parameter " + std::to_string(k));
  }
  int64_t total = 0;
  for (auto b : bucket_bytes) total += b;
  log_info("data parallel: {} ranks, {} gradient buckets ({} in all, buckets of about {})", group_->world_size(),
           buckets_.size(), format_bytes(static_cast<double>(total)), format_bytes(options_.bucket_size_mb * mb));
}

DataParallel::~DataParallel() = default;

std::vector<std::vector<size_t>> DataParallel::bucket_layout() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b.params);
  return out;
}

void DataParallel::reset_buckets() {
  for (auto& s : slots_) s.ready = false;
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.launched = false;
    b.work.reset();
  }
  for (auto& d : *done_ns_) d.store(0);
  next_bucket_ = 0;
}

void DataParallel::drain() {
  for (auto& b : buckets_) {
    if (b.work) group_->wait(b.work, "gradient all-reduce of an interrupted step");
    b.work.reset();
  }
}

void DataParallel::begin_micro_step(bool sync_after_backward) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (armed_) drain();  // the previous step stopped between backward and finish() (an OOM retry)
  armed_ = sync_after_backward;
  if (armed_) reset_buckets();
}

void DataParallel::on_gradient_ready(size_t k) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_ || slots_[k].ready) return;
  slots_[k].ready = true;
  Bucket& b = buckets_[slots_[k].bucket];
  if (--b.pending == 0) launch_ready_buckets();
}

void DataParallel::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) launch(next_bucket_++);
}

void DataParallel::launch(size_t index) {
  torch::NoGradGuard no_grad;
  Bucket& b = buckets_[index];
  for (size_t k : b.params) {
    const torch::Tensor& grad = params_[k].grad();
    auto slice = b.flat.narrow(0, slots_[k].offset, params_[k].numel());
    if (grad.defined()) {
      slice.copy_(grad.reshape(-1));
    } else {
      slice.zero_();  // unused in this backward: contributes zeros, as in PyTorch's DDP
    }
  }
  // Averaging before the sum keeps low-precision gradients in range.
  b.flat.div_(group_->world_size());
  b.launched_at = Clock::now();
  b.launched = true;
  b.work = group_->all_reduce_sum(b.flat);
  auto done = done_ns_;
  try {
    b.work->getFuture()->addCallback([done, index](c10::ivalue::Future&) { (*done)[index].store(steady_now_ns()); });
  } catch (const c10::Error&) {
    // A backend without futures: finish() takes the completion time when its wait returns.
  }
}

void DataParallel::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_) return;
  const auto entered = Clock::now();
  for (auto& b : buckets_) b.pending = 0;  // what backward did not produce is zeros
  launch_ready_buckets();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    group_->wait(b.work, "gradient all-reduce (bucket " + std::to_string(i + 1) + " of " +
                             std::to_string(buckets_.size()) + ")");
    if ((*done_ns_)[i].load() == 0) (*done_ns_)[i].store(steady_now_ns());
    b.work.reset();
    for (size_t k : b.params) {
      torch::Tensor& p = params_[k];
      auto averaged = b.flat.narrow(0, slots_[k].offset, p.numel()).view_as(p);
      if (p.grad().defined()) {
        p.mutable_grad().copy_(averaged);
      } else {
        p.mutable_grad() = averaged.clone();
      }
    }
  }
  armed_ = false;
  record_stats(entered);
}

void DataParallel::record_stats(Clock::time_point finish_entered) {
  // The union of the all-reduces' [launch, done] intervals, and its part before finish().
  std::vector<std::pair<int64_t, int64_t>> spans;
  CommStats s;
  s.syncs = 1;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    spans.emplace_back(steady_ns(buckets_[i].launched_at), std::max(steady_ns(buckets_[i].launched_at), (*done_ns_)[i].load()));
    s.bytes += buckets_[i].flat.numel() * static_cast<int64_t>(buckets_[i].flat.element_size());
  }
  s.buckets = static_cast<int64_t>(buckets_.size());
  const SpanCover cover = cover_spans(std::move(spans), steady_ns(finish_entered));
  s.comm_seconds = static_cast<double>(cover.covered_ns) * 1e-9;
  s.hidden_seconds = static_cast<double>(cover.before_cut_ns) * 1e-9;
  s.finish_seconds = std::chrono::duration<double>(Clock::now() - finish_entered).count();
  last_ = s;
  total_ += s;
}

}  // namespace hwt
