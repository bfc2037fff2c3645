#include "hwtrain/dist/segments.h"

#include <algorithm>
#include <map>

#include "hwtrain/core/error.h"

namespace hwt {

namespace {

struct Joined {
  torch::Tensor whole;  // flattened
  std::vector<std::pair<int64_t, int64_t>> spans;  // [offset, end) of each segment
  bool scalar = false;
};

// Elements the segments of each key bring: a tensor is allocated only once they add up to it, so a
// forged shape cannot make the reader allocate more than the shards hold.
std::map<std::string, int64_t> segment_elements(const SegmentList& entries) {
  std::map<std::string, int64_t> sum;
  for (const auto& [name, t] : entries) {
    const size_t at = name.rfind('@');
    if (at != std::string::npos) sum[name.substr(0, at)] += t.numel();
  }
  return sum;
}

}  // namespace

int64_t segment_offset(const std::string& name, size_t at, const std::string& what) {
  const std::string digits = name.substr(at + 1);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) {
    throw IoError(what + ": entry '" + name + "' has no valid element offset after '@'");
  }
  return std::stoll(digits);
}

std::string segment_tiling_error(std::vector<std::pair<int64_t, int64_t>> spans, int64_t n) {
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  for (const auto& [a, b] : spans) {
    if (a != at) return a > at ? "elements " + std::to_string(at) + ".." + std::to_string(a) + " are in no segment"
                               : "segments overlap at element " + std::to_string(a);
    at = b;
  }
  return at == n ? "" : "elements " + std::to_string(at) + ".." + std::to_string(n) + " are in no segment";
}

SegmentList join_segments(const SegmentList& entries, const ShapeOf& shape_of, const std::string& what) {
  torch::NoGradGuard no_grad;
  const std::map<std::string, int64_t> brought = segment_elements(entries);
  std::vector<std::string> order;
  std::map<std::string, Joined> joined;
  SegmentList out;
  for (const auto& [name, t] : entries) {
    const size_t at = name.rfind('@');
    if (at == std::string::npos) {
      out.emplace_back(name, t);
      continue;
    }
    const std::string key = name.substr(0, at);
    const int64_t offset = segment_offset(name, at, what);
    auto it = joined.find(key);
    if (it == joined.end()) {
      const auto shape = shape_of(key);
      if (!shape) throw IoError(what + ": entry '" + name + "' belongs to no tensor of this model");
      Joined j;
      j.scalar = shape->empty();
      const int64_t numel = c10::multiply_integers(*shape);
      if (j.scalar ? t.numel() != 1 : brought.at(key) != numel) {
        throw IoError(what + ": the segments of '" + key + "' hold " + std::to_string(j.scalar ? t.numel() : brought.at(key)) +
                      " elements, its shape has " + std::to_string(j.scalar ? 1 : numel) +
                      " (a shard missing, repeated or from another run)");
      }
      j.whole = j.scalar ? t.detach().to(torch::kCPU).reshape({}).clone()
                         : torch::zeros({c10::multiply_integers(*shape)}, torch::kFloat);
      it = joined.emplace(key, std::move(j)).first;
      order.push_back(key);
      if (it->second.scalar) continue;
    } else if (it->second.scalar) {
      continue;
    }
    Joined& j = it->second;
    if (offset + t.numel() > j.whole.numel()) {
      throw IoError(what + ": segment '" + name + "' of " + std::to_string(t.numel()) + " elements runs past the " +
                    std::to_string(j.whole.numel()) + " of '" + key + "'");
    }
    j.whole.narrow(0, offset, t.numel()).copy_(t.detach().reshape(-1));
    j.spans.emplace_back(offset, offset + t.numel());
  }
  for (const auto& key : order) {
    Joined& j = joined[key];
    const std::string gap = j.scalar ? "" : segment_tiling_error(j.spans, j.whole.numel());
    if (!gap.empty()) {
      throw IoError(what + ": '" + key + "' (" + std::to_string(j.whole.numel()) + " elements): " + gap +
                    " (a shard missing, repeated or from another run)");
    }
    out.emplace_back(key, j.scalar ? j.whole : j.whole.view(*shape_of(key)));
  }
  return out;
}

}  // namespace hwt
