#include "hwtrain/dist/zero1.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"

namespace hwt {

std::vector<std::string> Zero1Ownership::owned_by(int rank) const {
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (owner[i] == rank) out.push_back(names[i]);
  }
  return out;
}

int Zero1Ownership::owner_of(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return owner[i];
  }
  return -1;
}

Zero1Ownership assign_zero1_owners(const NamedTensors& params, int world_size) {
  if (world_size < 1) throw ConfigError("ZeRO-1 needs a world size of at least 1, got " + std::to_string(world_size));
  Zero1Ownership o;
  o.world_size = world_size;
  o.owner.assign(params.size(), 0);
  o.numel_per_rank.assign(world_size, 0);
  for (const auto& [name, p] : params) o.names.push_back(name);
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].second.numel() > params[b].second.numel(); });
  for (size_t i : order) {
    const int r = static_cast<int>(std::min_element(o.numel_per_rank.begin(), o.numel_per_rank.end()) -
                                   o.numel_per_rank.begin());
    o.owner[i] = r;
    o.numel_per_rank[r] += params[i].second.numel();
  }
  return o;
}

std::vector<std::string> owned_parameter_names(const NamedTensors& params, int rank, int world_size) {
  return assign_zero1_owners(params, world_size).owned_by(rank);
}

namespace {

// One broadcast of ZeRO-1's parameter sync: a lone contiguous parameter itself (the owner sends it,
// the others receive into theirs: no copy), or several packed into a flat buffer.
struct Transfer {
  int root = 0;
  std::vector<torch::Tensor> tensors;
  torch::Tensor flat;
  bool packed = false;
  ProcessGroup::WorkPtr work;
};

// Per owner and dtype, the owner's parameters in order, in runs of at most `bucket_bytes` (a larger
// one goes alone). Every rank computes the same list.
std::vector<Transfer> plan_transfers(const NamedTensors& params, const Zero1Ownership& ownership,
                                     int64_t bucket_bytes) {
  std::vector<Transfer> out;
  for (int r = 0; r < ownership.world_size; ++r) {
    std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
    for (size_t i = 0; i < params.size(); ++i) {
      if (ownership.owner[i] == r) by_dtype[params[i].second.scalar_type()].push_back(params[i].second.detach());
    }
    for (auto& [dtype, tensors] : by_dtype) {
      Transfer t;
      t.root = r;
      int64_t bytes = 0;
      for (auto& x : tensors) {
        const int64_t b = x.numel() * static_cast<int64_t>(x.element_size());
        if (!t.tensors.empty() && bytes + b > bucket_bytes) {
          out.push_back(std::move(t));
          t = Transfer();
          t.root = r;
          bytes = 0;
        }
        t.tensors.push_back(x);
        bytes += b;
      }
      if (!t.tensors.empty()) out.push_back(std::move(t));
    }
  }
  return out;
}

bool packs(const Transfer& t) { return t.tensors.size() > 1 || !t.tensors.front().is_contiguous(); }

int64_t transfer_bytes(const Transfer& t) {
  int64_t bytes = 0;
  for (const auto& x : t.tensors) bytes += x.numel() * static_cast<int64_t>(x.element_size());
  return bytes;
}

// `slot` is one of the two packing buffers, as bytes: a transfer reuses the one its predecessor but
// one has finished with (waited for), so at most two buckets exist however late the backend drops
// its own reference to a finished work's tensors (Gloo's worker thread does so after the wait).
void start_transfer(Transfer& t, const torch::Tensor& slot, ProcessGroup& group) {
  if (!packs(t)) {
    t.flat = t.tensors.front().view(-1);
  } else {
    t.flat = slot.narrow(0, 0, transfer_bytes(t)).view(t.tensors.front().scalar_type());
    t.packed = true;
    if (group.rank() == t.root) {  // each copied into its place: no temporary (a non-contiguous one's reshape)
      int64_t offset = 0;
      for (const auto& x : t.tensors) {
        t.flat.narrow(0, offset, x.numel()).view(x.sizes()).copy_(x);
        offset += x.numel();
      }
    }
  }
  t.work = group.broadcast(t.flat, t.root);
}

void finish_transfer(Transfer& t, ProcessGroup& group) {
  group.wait(t.work, "ZeRO-1 parameter broadcast from rank " + std::to_string(t.root));
  if (t.packed && group.rank() != t.root) {
    int64_t offset = 0;
    for (auto& x : t.tensors) {
      x.copy_(t.flat.narrow(0, offset, x.numel()).view(x.sizes()));
      offset += x.numel();
    }
  }
  t.flat = torch::Tensor();
  t.work.reset();
}

}  // namespace

void sync_parameters_after_step(const NamedTensors& params, const Zero1Ownership& ownership, ProcessGroup& group,
                                int64_t bucket_bytes) {
  if (ownership.names.size() != params.size() || ownership.world_size != group.world_size()) {
    throw ConfigError("ZeRO-1 ownership was computed for " + std::to_string(ownership.names.size()) +
                      " parameters and " + std::to_string(ownership.world_size) + " ranks, but the step has " +
                      std::to_string(params.size()) + " parameters and " + std::to_string(group.world_size()) +
                      " ranks");
  }
  torch::NoGradGuard no_grad;
  constexpr size_t kInFlight = 2;  // launching a third waits for the oldest: at most two buckets packed
  std::vector<Transfer> transfers = plan_transfers(params, ownership, std::max<int64_t>(1, bucket_bytes));
  int64_t largest = 0;
  torch::TensorOptions bytes = torch::TensorOptions().dtype(torch::kUInt8);
  for (const auto& t : transfers) {
    if (!packs(t)) continue;
    largest = std::max(largest, transfer_bytes(t));
    bytes = bytes.device(t.tensors.front().device());
  }
  std::vector<torch::Tensor> slots;
  for (size_t k = 0; k < kInFlight && largest > 0; ++k) slots.push_back(torch::empty({largest}, bytes));
  size_t oldest = 0;
  for (size_t i = 0; i < transfers.size(); ++i) {
    if (i - oldest == kInFlight) finish_transfer(transfers[oldest++], group);
    start_transfer(transfers[i], slots.empty() ? torch::Tensor() : slots[i % kInFlight], group);
  }
  while (oldest < transfers.size()) finish_transfer(transfers[oldest++], group);
}

NamedTensors gather_optimizer_state(const NamedTensors& local_state, ProcessGroup& group) {
  constexpr int kSizeTag = 7001, kBytesTag = 7002;
  const auto cpu_bytes = torch::TensorOptions().dtype(torch::kUInt8);
  const auto size_options = torch::TensorOptions().dtype(torch::kInt64).device(group.device());
  if (group.rank() != 0) {
    c10::List<std::string> names;
    c10::List<at::Tensor> tensors;
    for (const auto& [name, t] : local_state) {
      names.push_back(name);
      tensors.push_back(t.detach().cpu());
    }
    std::vector<char> bytes = torch::pickle_save(c10::ivalue::Tuple::create({names, tensors}));
    torch::Tensor size = torch::full({1}, static_cast<int64_t>(bytes.size()), size_options);
    group.send(size, 0, kSizeTag);
    torch::Tensor payload = torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, cpu_bytes)
                                .to(group.device(), /*non_blocking=*/false, /*copy=*/true);
    group.send(payload, 0, kBytesTag);
    return {};
  }
  NamedTensors all;
  for (const auto& [name, t] : local_state) all.emplace_back(name, t.detach().cpu());
  for (int r = 1; r < group.world_size(); ++r) {
    torch::Tensor size = torch::zeros({1}, size_options);
    group.recv(size, r, kSizeTag);
    torch::Tensor payload = torch::empty({size.item<int64_t>()}, cpu_bytes.device(group.device()));
    group.recv(payload, r, kBytesTag);
    payload = payload.cpu().contiguous();
    std::vector<char> bytes(payload.data_ptr<uint8_t>(), payload.data_ptr<uint8_t>() + payload.numel());
    auto tuple = torch::pickle_load(bytes).toTuple();
    const auto names = tuple->elements()[0].toListRef();
    const auto tensors = tuple->elements()[1].toListRef();
    for (size_t i = 0; i < names.size(); ++i) all.emplace_back(names[i].toStringRef(), tensors[i].toTensor());
  }
  return all;
}

std::string describe_zero1_memory(const Zero1Ownership& ownership, int64_t bytes_per_element) {
  std::vector<std::string> parts;
  int64_t total = 0;
  for (int r = 0; r < ownership.world_size; ++r) {
    parts.push_back("rank " + std::to_string(r) + " " +
                    format_bytes(static_cast<double>(ownership.numel_per_rank[r] * bytes_per_element)));
    total += ownership.numel_per_rank[r];
  }
  return "optimizer state per rank (ZeRO-1, " + std::to_string(ownership.world_size) + " ranks): " + join(parts) +
         " (unsharded: " + format_bytes(static_cast<double>(total * bytes_per_element)) + ")";
}

}  // namespace hwt
