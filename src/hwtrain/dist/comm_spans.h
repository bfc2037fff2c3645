// How long collectives were in flight: the union of their [launch, done] intervals on the steady
// clock, and the part of it before a cut (the moment the caller started waiting: what ran hidden
// behind compute). Shared by DataParallel's and ShardedParameters' communication statistics.
#pragma once
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

namespace hwt {

int64_t steady_now_ns();
int64_t steady_ns(std::chrono::steady_clock::time_point t);

struct SpanCover {
  int64_t covered_ns = 0;     // wall time with at least one interval open
  int64_t before_cut_ns = 0;  // the part of it before `cut`
};

// `spans`: [start, end] in ns (end >= start), any order and overlap.
SpanCover cover_spans(std::vector<std::pair<int64_t, int64_t>> spans, int64_t cut_ns);

}  // namespace hwt
