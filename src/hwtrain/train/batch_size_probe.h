// Automatic micro-batch sizing by measurement (optimization.auto_batch_size): before training,
// probe steps (forward, backward and an optimizer step at learning rate 0, so the weights do not
// move) find the largest micro-batch whose measured peak memory stays under the plan's memory
// budget: on CPU the resident memory the step adds plus the weights and optimizer state (what the
// planner's memory model estimates), on CUDA the caching allocator's peak. The
// candidates are the divisors of the per-rank batch up to optimization.max_batch_size, so that
// micro-batch x accumulation keeps the global batch exact; the search probes the largest first
// (it usually fits) and then bisects, at most kMaxProbes steps.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hwt {

inline constexpr int kMaxProbes = 8;

struct ProbeRecord {
  int64_t micro_batch_size = 0;
  double peak_bytes = 0;  // measured peak of the probe step
  bool fits = false;
  std::string note;       // e.g. "out of memory"
};

struct BatchProbeResult {
  int64_t micro_batch_size = 0;  // the largest candidate that fit (the smallest if none did)
  bool found = false;            // some candidate fit
  std::vector<ProbeRecord> probes;
  std::string describe(double budget_bytes) const;  // one line per probe and the verdict
};

// Divisors of `per_rank_batch` that are <= max_micro_batch, ascending (always holds 1).
std::vector<int64_t> micro_batch_candidates(int64_t per_rank_batch, int64_t max_micro_batch);

// The search itself, over ascending `candidates`, calling `probe` at most `max_probes` times.
BatchProbeResult search_micro_batch(const std::vector<int64_t>& candidates,
                                    const std::function<ProbeRecord(int64_t)>& probe, int max_probes = kMaxProbes);

}  // namespace hwt
