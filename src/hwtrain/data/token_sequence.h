// TokenSequence: one split of a dataset as a single run of tokens, made of the TokenSpans of its
// shards in order. A window may cross from one shard into the next, so a dataset cut into shards
// yields exactly the windows of the same tokens in one file. Implicitly built from a TokenSpan,
// so code written for one token file works unchanged. Copying is cheap (spans share their maps).
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "hwtrain/data/token_span.h"

namespace hwt {

class TokenSequence {
 public:
  TokenSequence() { starts_.push_back(0); }
  TokenSequence(TokenSpan span) : TokenSequence(std::vector<TokenSpan>{std::move(span)}) {}  // NOLINT: implicit
  explicit TokenSequence(std::vector<TokenSpan> pieces) : pieces_(std::move(pieces)) {
    starts_.reserve(pieces_.size() + 1);
    starts_.push_back(0);
    for (const TokenSpan& p : pieces_) starts_.push_back(starts_.back() + p.size());
  }

  int64_t size() const { return starts_.back(); }
  bool empty() const { return size() == 0; }
  size_t num_pieces() const { return pieces_.size(); }
  const TokenSpan& piece(size_t i) const { return pieces_[i]; }
  // Global offset of the first token of piece i; piece_begin(num_pieces()) == size().
  int64_t piece_begin(size_t i) const { return starts_[i]; }
  // The piece holding token `offset` (in [0, size())).
  size_t piece_of(int64_t offset) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    return static_cast<size_t>(it - starts_.begin()) - 1;
  }

  int64_t operator[](int64_t i) const {
    size_t p = piece_of(i);
    return pieces_[p][i - starts_[p]];
  }

  // out[0..n) = tokens [offset, offset + n), across pieces; std::out_of_range outside.
  void copy_window(int64_t offset, int64_t n, int64_t* out) const {
    if (offset < 0 || n < 0 || offset > size() - n) {
      throw std::out_of_range("token window [" + std::to_string(offset) + ", " + std::to_string(offset + n) +
                              ") outside a sequence of " + std::to_string(size()) + " tokens");
    }
    if (pieces_.size() == 1) {
      pieces_[0].copy_window(offset, n, out);
      return;
    }
    size_t p = piece_of(offset);
    while (n > 0) {
      // Empty pieces have begin == end and are skipped by piece_of and by this loop alike.
      int64_t local = offset - starts_[p];
      int64_t take = std::min(n, pieces_[p].size() - local);
      if (take > 0) {
        pieces_[p].copy_window(local, take, out);
        out += take;
        offset += take;
        n -= take;
      }
      ++p;
    }
  }

 private:
  std::vector<TokenSpan> pieces_;
  std::vector<int64_t> starts_;  // prefix sums of piece sizes, num_pieces() + 1 entries
};

}  // namespace hwt
