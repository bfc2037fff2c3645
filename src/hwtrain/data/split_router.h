// SplitRouter: gives each split unit of the corpus (document, or piece of a long one) its index and
// its split (the seeded choice of corpus.h), and writes it into a TokenSink with an end-of-text id
// between consecutive documents of a split (none between adjacent pieces of one document).
// It also guarantees both splits are non-empty when the corpus has two units: while no unit went
// to validation the last train unit is held back (it moves to validation if none ever does), and
// while train is empty the first validation unit is held back (it moves to train if needed).
// Streaming: at most one unit is held, never the corpus.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hwtrain/data/corpus_reader.h"
#include "hwtrain/data/token_sink.h"
#include "hwtrain/data/tokenizer.h"

namespace hwt {

class SplitRouter {
 public:
  SplitRouter(const Tokenizer& tokenizer, TokenSink& sink, int64_t split_seed, double val_fraction);

  // Routes the pieces of a chunk (tokenized unless the tokenizer is byte-level), in order.
  void add_chunk(const CorpusChunk& chunk);
  // Writes what is held back; DataError "corpus <what> is too small to split" when a split is empty.
  void finish(const std::string& what, int64_t num_bytes);

  int64_t num_units() const { return next_index_; }
  int64_t num_units(Split s) const { return count_[slot(s)]; }
  int64_t num_tokens(Split s) const { return tokens_[slot(s)]; }
  int64_t num_tokens() const { return tokens_[0] + tokens_[1]; }

 private:
  struct Held {
    bool active = false;
    int64_t index = 0;
    bool continues = false;
    std::string bytes;         // byte-level tokenizers
    std::vector<int32_t> ids;  // others
  };
  static int slot(Split s) { return s == Split::kTrain ? 0 : 1; }

  void start_unit(int64_t index, bool continues, bool to_val);
  void add_tokens(std::string_view text, const int32_t* ids, size_t n);
  void begin_write(Split s, int64_t index, bool continues);
  void write_tokens(Split s, std::string_view text, const int32_t* ids, size_t n);
  void release(Held& held, Split s);

  const Tokenizer& tok_;
  TokenSink& sink_;
  int64_t split_seed_;
  double val_fraction_;
  bool byte_level_;
  int64_t next_index_ = 0;
  int64_t count_[2] = {0, 0}, tokens_[2] = {0, 0}, last_index_[2] = {-2, -2};
  bool seen_[2] = {false, false};
  // Where the current unit's tokens go: a split, or one of the holds.
  enum class Dest { kTrain, kVal, kHoldTrain, kHoldVal } dest_ = Dest::kTrain;
  Held hold_train_, hold_val_;
};

}  // namespace hwt
