// Segments: the pieces of tensors that sharding gives each rank, named "<key>@<offset>" (a
// flattened tensor's elements from <offset> on), joined back into whole tensors: what rank 0 does
// with the gathered optimizer state, and what reading a sharded checkpoint does with its shard files.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hwt {

using SegmentList = std::vector<std::pair<std::string, torch::Tensor>>;
// The whole shape of `key`, or nullopt when no such tensor exists.
using ShapeOf = std::function<std::optional<std::vector<int64_t>>(const std::string& key)>;

// Joins every "<key>@<offset>" entry into the tensor <key> (fp32, of shape_of(key)); a key whose
// shape is a scalar takes its first segment (each segment of a parameter repeats its step count).
// Entries without "@" pass through. Keys come out in the order they first appear. Throws IoError
// naming `what` for an unknown key, a malformed offset, a segment out of range or overlapping
// another, or a tensor whose elements are not all covered.
// The element offset after the '@' at `at` in a segment's name "<key>@<offset>" (at most 18
// digits); IoError naming `what` and the entry otherwise.
int64_t segment_offset(const std::string& name, size_t at, const std::string& what);
// "" when the spans [offset, end) tile [0, n) exactly, else what is wrong: "elements a..b are in no
// segment" (a shard missing) or "segments overlap at element a" (a shard repeated).
std::string segment_tiling_error(std::vector<std::pair<int64_t, int64_t>> spans, int64_t n);

SegmentList join_segments(const SegmentList& entries, const ShapeOf& shape_of, const std::string& what);

}  // namespace hwt
