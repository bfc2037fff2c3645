// Byte-pair merging of one word (see bpe_merges.h).
#include "hwtrain/data/bpe_merges.h"

#include <climits>
#include <functional>
#include <queue>
#include <utility>

namespace hwt {

namespace {

int32_t merge_rank(const MergeRanks& ranks, const std::string& left, const std::string& right) {
  const auto it = ranks.find(left + " " + right);
  return it == ranks.end() ? INT32_MAX : it->second;
}

// The lowest-ranked adjacent pair merged first, the leftmost on ties, until none merges: rescanning
// the word each time, O(n^2) but the fastest for the short words most text is made of.
void merge_by_rescan(std::vector<std::string>& sym, const MergeRanks& ranks) {
  while (sym.size() > 1) {
    int32_t best = INT32_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      const int32_t rank = merge_rank(ranks, sym[i], sym[i + 1]);
      if (rank < best) best = rank, at = i;
    }
    if (best == INT32_MAX) return;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
}

// The same merges with the symbols in a linked list and the candidate pairs in a heap, as Hugging
// Face's word.rs does: O(n log n) (16,000 identical characters took 4.6 s by rescanning).
void merge_by_heap(std::vector<std::string>& sym, const MergeRanks& ranks) {
  const int n = static_cast<int>(sym.size());
  std::vector<int> next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  std::vector<bool> gone(static_cast<size_t>(n), false);
  for (int i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  using Candidate = std::pair<int32_t, int>;  // (merge rank, left symbol)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto offer = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    if (const int32_t rank = merge_rank(ranks, sym[left], sym[next[left]]); rank != INT32_MAX) heap.emplace(rank, left);
  };
  for (int i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const auto [rank, left] = heap.top();
    heap.pop();
    if (gone[left] || next[left] < 0 || merge_rank(ranks, sym[left], sym[next[left]]) != rank) continue;  // stale
    const int right = next[left];
    sym[left] += sym[right];
    gone[right] = true;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    offer(prev[left]);
    offer(left);
  }
  std::vector<std::string> kept;
  for (int i = 0; i < n; ++i) {
    if (!gone[i]) kept.push_back(std::move(sym[i]));
  }
  sym = std::move(kept);
}

}  // namespace

void merge_bpe_symbols(std::vector<std::string>& symbols, const MergeRanks& ranks) {
  if (symbols.size() <= kRescanSymbols) {
    merge_by_rescan(symbols, ranks);
  } else {
    merge_by_heap(symbols, ranks);
  }
}

}  // namespace hwt
