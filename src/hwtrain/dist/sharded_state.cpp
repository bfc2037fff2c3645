// ShardedParameters' conversions between its shards and whole tensors: the fp32 master values of
// every parameter (checkpoints, export) and the AdamW state cut into segments and rebuilt.
#include <map>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/segments.h"
#include "hwtrain/dist/sharded_parameters.h"
#include "hwtrain/dist/sharded_unit.h"

namespace hwt {

using NamedList = std::vector<std::pair<std::string, torch::Tensor>>;

NamedList ShardedParameters::full_parameters(bool everywhere) {
  torch::NoGradGuard no_grad;
  NamedList out;
  for (auto& up : units_) {
    Unit& u = *up;
    torch::Tensor whole = torch::empty({u.shard * group_->world_size()}, u.master.options());
    wait(group_->all_gather_into(whole, u.master), "gathering the master weights of " + u.name);
    if (!everywhere && group_->rank() != 0) continue;
    const torch::Tensor host = whole.to(torch::kCPU);  // one unit at a time on the device
    for (size_t i = 0; i < u.params.size(); ++i) {
      out.emplace_back(u.names[i], host.narrow(0, u.offsets[i], u.params[i].numel()).view(u.shapes[i]).clone());
    }
  }
  return out;
}

namespace {

constexpr const char* kMomentKeys[] = {"exp_avg.", "exp_avg_sq."};

const torch::Tensor& find_entry(const std::map<std::string, torch::Tensor>& by_name, const std::string& key) {
  auto it = by_name.find(key);
  if (it == by_name.end()) throw IoError("optimizer state lacks '" + key + "'");
  return it->second;
}

}  // namespace

NamedList ShardedParameters::shard_state(const NamedList& whole) const {
  std::map<std::string, torch::Tensor> by_name(whole.begin(), whole.end());
  std::map<std::string, int64_t> numel;  // of each parameter, which its moments must match
  for (const auto& up : units_) {
    // From the shapes: ZeRO-3 frees the parameters themselves.
    for (size_t i = 0; i < up->names.size(); ++i) numel[up->names[i]] = c10::multiply_integers(up->shapes[i]);
  }
  for (const auto& [key, t] : by_name) {  // every rank checks every moment, not only its segments'
    const auto it = key.rfind("step.", 0) == 0 ? numel.end() : numel.find(key.substr(key.find('.') + 1));
    if (it != numel.end() && t.numel() != it->second) {
      throw IoError("optimizer state '" + key + "' has " + std::to_string(t.numel()) +
                    " values, but its parameter has " + std::to_string(it->second));
    }
  }
  return shard_state([&](const std::string& key, int64_t offset, int64_t count) {
    const torch::Tensor& t = find_entry(by_name, key);
    return key.rfind("step.", 0) == 0 ? t : t.reshape(-1).narrow(0, offset, count);
  });
}

NamedList ShardedParameters::shard_state(const StateSlice& slice) const {
  NamedList out;
  for (const auto& seg : segments_) {
    for (const char* key : kMomentKeys) {
      out.emplace_back(key + seg.name(), slice(key + seg.param, seg.offset, seg.master.numel()).to(seg.master.options()).clone());
    }
    out.emplace_back("step." + seg.name(), slice("step." + seg.param, seg.offset, 0).clone());
  }
  return out;
}

NamedList ShardedParameters::unshard_state(const NamedList& segments) const {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& up : units_) {
    for (size_t i = 0; i < up->names.size(); ++i) {
      for (const char* k : kMomentKeys) shapes[k + up->names[i]] = up->shapes[i];
      shapes["step." + up->names[i]] = {};
    }
  }
  NamedList whole = join_segments(
      segments,
      [&](const std::string& key) -> std::optional<std::vector<int64_t>> {
        auto it = shapes.find(key);
        return it == shapes.end() ? std::nullopt : std::optional<std::vector<int64_t>>(it->second);
      },
      "sharded optimizer state");
  if (whole.size() != shapes.size()) {
    throw IoError("sharded optimizer state has " + std::to_string(whole.size()) + " whole entries, the model needs " +
                  std::to_string(shapes.size()));
  }
  return whole;
}

}  // namespace hwt
