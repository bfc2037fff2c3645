#include "hwtrain/dist/comm_spans.h"

#include <algorithm>

namespace hwt {

int64_t steady_now_ns() { return steady_ns(std::chrono::steady_clock::now()); }

int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

SpanCover cover_spans(std::vector<std::pair<int64_t, int64_t>> spans, int64_t cut_ns) {
  std::sort(spans.begin(), spans.end());
  SpanCover c;
  int64_t start = 0, end = -1;
  auto close = [&] {
    if (end < start) return;
    c.covered_ns += end - start;
    c.before_cut_ns += std::max<int64_t>(0, std::min(end, cut_ns) - start);
  };
  for (const auto& [a, b] : spans) {
    if (a > end) {
      close();
      start = a;
      end = b;
    } else {
      end = std::max(end, b);
    }
  }
  close();
  return c;
}

}  // namespace hwt
