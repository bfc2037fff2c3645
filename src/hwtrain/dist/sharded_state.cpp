// ShardedParameters' conversions between its shards and whole tensors: the fp32 master values of
// every parameter (checkpoints, export) and the AdamW state cut into segments and rebuilt.
#include <map>

#include "hwtrain/core/error.h"
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
    torch::Tensor input = u.master.clone();
    wait(group_->all_gather_into(whole, input), "gathering the master weights of " + u.name);
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
  NamedList out;
  for (const auto& seg : segments_) {
    for (const char* key : kMomentKeys) {
      const torch::Tensor& t = find_entry(by_name, key + seg.param);
      out.emplace_back(key + seg.name(),
                       t.reshape(-1).narrow(0, seg.offset, seg.master.numel()).to(seg.master.options()).clone());
    }
    out.emplace_back("step." + seg.name(), find_entry(by_name, "step." + seg.param).clone());
  }
  return out;
}

NamedList ShardedParameters::unshard_state(const NamedList& segments) const {
  std::map<std::string, torch::Tensor> whole;  // "exp_avg.<param>" -> flat fp32
  std::map<std::string, torch::Tensor> steps;
  std::map<std::string, int64_t> filled;
  for (const auto& [name, t] : segments) {
    const size_t at = name.rfind('@');
    if (at == std::string::npos) throw IoError("sharded optimizer state entry '" + name + "' names no segment");
    const std::string key = name.substr(0, at);
    const int64_t offset = std::stoll(name.substr(at + 1));
    if (key.rfind("step.", 0) == 0) {
      steps.emplace(key, t);
      continue;
    }
    auto it = whole.find(key);
    if (it == whole.end()) it = whole.emplace(key, torch::Tensor()).first;
    const std::string param = key.substr(key.find('.') + 1);
    for (const auto& up : units_) {
      for (size_t i = 0; i < up->names.size(); ++i) {
        if (up->names[i] != param) continue;
        if (!it->second.defined()) it->second = torch::zeros({up->params[i].numel()}, t.options().dtype(torch::kFloat));
      }
    }
    if (!it->second.defined()) throw IoError("sharded optimizer state names an unknown parameter '" + param + "'");
    it->second.narrow(0, offset, t.numel()).copy_(t.reshape(-1));
    filled[key] += t.numel();
  }
  NamedList out;
  for (const auto& up : units_) {
    for (size_t i = 0; i < up->names.size(); ++i) {
      for (const char* k : kMomentKeys) {
        const std::string key = k + up->names[i];
        auto it = whole.find(key);
        if (it == whole.end() || filled[key] != up->params[i].numel()) {
          throw IoError("sharded optimizer state covers " + std::to_string(filled[key]) + " of the " +
                        std::to_string(up->params[i].numel()) + " elements of '" + key + "'");
        }
        out.emplace_back(key, it->second.view(up->shapes[i]));
      }
      out.emplace_back("step." + up->names[i], find_entry(steps, "step." + up->names[i]));
    }
  }
  return out;
}

}  // namespace hwt
