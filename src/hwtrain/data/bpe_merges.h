// Byte-pair merging of one word's symbols: the adjacent pair of lowest merge rank merged first, the
// leftmost on ties, until no pair has a rank (Hugging Face tokenizers' BPE model, word.rs).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace hwt {

using MergeRanks = std::unordered_map<std::string, int32_t>;  // "left right" -> rank

// Up to this many symbols a word is merged by rescanning all its pairs after each merge (O(n^2),
// the fastest for the short words most text is made of), longer ones with a heap (O(n log n)):
// the fastest split of the three tokenizers of bench/tokenizer_bench.sh side by side
// (docs/benchmarks.md, 2026-11-29). Both give the same merges.
inline constexpr size_t kRescanSymbols = 12;

// Merges `symbols` in place.
void merge_bpe_symbols(std::vector<std::string>& symbols, const MergeRanks& ranks);

}  // namespace hwt
