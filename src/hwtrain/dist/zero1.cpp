#include "hwtrain/dist/zero1.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/dist/bucketed_broadcast.h"

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

void sync_parameters_after_step(const NamedTensors& params, const Zero1Ownership& ownership, ProcessGroup& group,
                                int64_t bucket_bytes) {
  if (ownership.names.size() != params.size() || ownership.world_size != group.world_size()) {
    throw ConfigError("ZeRO-1 ownership was computed for " + std::to_string(ownership.names.size()) +
                      " parameters and " + std::to_string(ownership.world_size) + " ranks, but the step has " +
                      std::to_string(params.size()) + " parameters and " + std::to_string(group.world_size()) +
                      " ranks");
  }
  std::vector<torch::Tensor> tensors;
  for (const auto& [name, p] : params) tensors.push_back(p);
  broadcast_from_owners(tensors, ownership.owner, group, bucket_bytes, "ZeRO-1 parameter broadcast");
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
