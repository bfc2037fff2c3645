// Helpers shared by the data tests: generated corpora, token dumps and error checks.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/data/token_sequence.h"

namespace hwt::testing {

// `n` documents of English-like words (deterministic), each ended by "\n%\n" when `separated`.
inline std::string generated_corpus(int n, bool separated = true, uint64_t seed = 1) {
  static const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and",
                                "runs", "far", "away", "from", "a", "small", "town", "where", "people",
                                "live", "in", "houses", "made", "of", "stone", "wood", "glass"};
  std::string out;
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int d = 0; d < n; ++d) {
    int sentences = 1 + static_cast<int>((x >> 33) % 3);
    for (int s = 0; s < sentences; ++s) {
      int len = 4 + static_cast<int>((x >> 40) % 8);
      for (int w = 0; w < len; ++w) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        std::string word = words[(x >> 33) % (sizeof words / sizeof *words)];
        if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
        out += word;
        out += w + 1 < len ? " " : ".\n";
      }
    }
    if (separated) out += "%\n";
  }
  return out;
}

inline std::vector<int64_t> to_vector(const TokenSequence& seq) {
  std::vector<int64_t> v(static_cast<size_t>(seq.size()));
  if (!v.empty()) seq.copy_window(0, seq.size(), v.data());
  return v;
}

// Bytes of a byte-tokenizer sequence, with end-of-text (256) shown as '|'.
inline std::string byte_text(const TokenSequence& seq) {
  std::string s;
  for (int64_t t : to_vector(seq)) s.push_back(t == 256 ? '|' : static_cast<char>(t));
  return s;
}

// Runs `f`, expects a DataError containing every needle; returns its message.
template <class F>
std::string expect_data_error(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
  } catch (const DataError& e) {
    std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    return msg;
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

inline void flip_byte_at(const std::filesystem::path& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

}  // namespace hwt::testing
