#include "hwtrain/train/batch_size_probe.h"

#include <fmt/format.h>

#include <cassert>

#include "hwtrain/core/strings.h"

namespace hwt {

std::vector<int64_t> micro_batch_candidates(int64_t per_rank_batch, int64_t max_micro_batch) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= per_rank_batch && d <= max_micro_batch; ++d) {
    if (per_rank_batch % d == 0) out.push_back(d);
  }
  if (out.empty()) out.push_back(1);
  return out;
}

BatchProbeResult search_micro_batch(const std::vector<int64_t>& candidates,
                                    const std::function<ProbeRecord(int64_t)>& probe, int max_probes) {
  assert(!candidates.empty() && max_probes >= 1);
  BatchProbeResult r;
  // Invariant: candidates[lo] fits (lo = -1: none known), candidates[hi] does not (hi = n: none known).
  int64_t lo = -1, hi = static_cast<int64_t>(candidates.size());
  auto run = [&](int64_t i) {
    ProbeRecord rec = probe(candidates[static_cast<size_t>(i)]);
    r.probes.push_back(rec);
    if (rec.fits) lo = i;
    else hi = i;
  };
  run(hi - 1);  // the largest usually fits: one probe
  while (hi - lo > 1 && static_cast<int>(r.probes.size()) < max_probes) run(lo + (hi - lo) / 2);
  r.found = lo >= 0;
  r.micro_batch_size = candidates[static_cast<size_t>(std::max<int64_t>(lo, 0))];
  return r;
}

std::string BatchProbeResult::describe(double budget_bytes) const {
  std::string s;
  for (const auto& p : probes) {
    s += fmt::format("  micro-batch {:>4}: peak {} {} budget {}{}\n", p.micro_batch_size, format_bytes(p.peak_bytes),
                     p.fits ? "<=" : ">", format_bytes(budget_bytes), p.note.empty() ? "" : " (" + p.note + ")");
  }
  s += found ? fmt::format("  -> micro-batch {} in {} probe steps", micro_batch_size, probes.size())
             : fmt::format("  -> no candidate fits; micro-batch {} (training will recover from out-of-memory errors "
                           "or stop with advice)",
                           micro_batch_size);
  return s;
}

}  // namespace hwt
