#include "hwtrain/data/split_router.h"

#include "hwtrain/core/error.h"
#include "hwtrain/data/corpus.h"

namespace hwt {

SplitRouter::SplitRouter(const Tokenizer& tokenizer, TokenSink& sink, int64_t split_seed, double val_fraction)
    : tok_(tokenizer), sink_(sink), split_seed_(split_seed), val_fraction_(val_fraction),
      byte_level_(tokenizer.is_byte_level()) {}

void SplitRouter::add_chunk(const CorpusChunk& chunk) {
  for (size_t i = 0; i < chunk.pieces.size(); ++i) {
    const ChunkPiece& p = chunk.pieces[i];
    if (!p.fragment || next_index_ == 0) {
      int64_t index = next_index_++;
      start_unit(index, p.continues, assign_to_val(split_seed_, index, val_fraction_));
    }
    if (byte_level_) {
      add_tokens(chunk.piece_text(i), nullptr, 0);
    } else {
      size_t begin = i == 0 ? 0 : chunk.id_ends[i - 1];
      add_tokens({}, chunk.ids.data() + begin, chunk.id_ends[i] - begin);
    }
  }
}

void SplitRouter::start_unit(int64_t index, bool continues, bool to_val) {
  if (!to_val) {
    seen_[0] = true;
    if (hold_val_.active) release(hold_val_, Split::kVal);  // train is not empty: it stays in validation
    if (!seen_[1]) {
      if (hold_train_.active) release(hold_train_, Split::kTrain);
      hold_train_ = Held{true, index, continues, {}, {}};
      dest_ = Dest::kHoldTrain;
      return;
    }
    begin_write(Split::kTrain, index, continues);
    dest_ = Dest::kTrain;
    return;
  }
  seen_[1] = true;
  if (hold_train_.active) release(hold_train_, Split::kTrain);  // validation is not empty any more
  if (!seen_[0] && count_[1] == 0 && !hold_val_.active) {
    hold_val_ = Held{true, index, continues, {}, {}};
    dest_ = Dest::kHoldVal;
    return;
  }
  begin_write(Split::kVal, index, continues);
  dest_ = Dest::kVal;
}

void SplitRouter::add_tokens(std::string_view text, const int32_t* ids, size_t n) {
  switch (dest_) {
    case Dest::kTrain: write_tokens(Split::kTrain, text, ids, n); return;
    case Dest::kVal: write_tokens(Split::kVal, text, ids, n); return;
    case Dest::kHoldTrain:
    case Dest::kHoldVal: {
      Held& h = dest_ == Dest::kHoldTrain ? hold_train_ : hold_val_;
      h.bytes.append(text);
      h.ids.insert(h.ids.end(), ids, ids + n);
      return;
    }
  }
}

void SplitRouter::begin_write(Split s, int64_t index, bool continues) {
  const int k = slot(s);
  const bool joined = continues && last_index_[k] == index - 1;
  if (count_[k] > 0 && !joined) {
    int32_t eot = tok_.eot_id();
    sink_.append(s, &eot, 1);
    ++tokens_[k];
  }
  sink_.begin_document(s);
  last_index_[k] = index;
  ++count_[k];
}

void SplitRouter::write_tokens(Split s, std::string_view text, const int32_t* ids, size_t n) {
  if (byte_level_) {
    sink_.append_bytes(s, text.data(), text.size());
    tokens_[slot(s)] += static_cast<int64_t>(text.size());
  } else {
    sink_.append(s, ids, n);
    tokens_[slot(s)] += static_cast<int64_t>(n);
  }
}

void SplitRouter::release(Held& held, Split s) {
  begin_write(s, held.index, held.continues);
  write_tokens(s, held.bytes, held.ids.data(), held.ids.size());
  const bool current = (&held == &hold_train_ && dest_ == Dest::kHoldTrain) ||
                       (&held == &hold_val_ && dest_ == Dest::kHoldVal);
  held = Held{};
  if (current) dest_ = s == Split::kTrain ? Dest::kTrain : Dest::kVal;  // later fragments follow it
}

void SplitRouter::finish(const std::string& what, int64_t num_bytes) {
  if (hold_train_.active) release(hold_train_, count_[1] == 0 ? Split::kVal : Split::kTrain);
  if (hold_val_.active) release(hold_val_, count_[0] == 0 && count_[1] > 0 ? Split::kTrain : Split::kVal);
  if (count_[0] == 0 || count_[1] == 0) {
    throw DataError("corpus " + what + " is too small to split: " + std::to_string(count_[0] + count_[1]) +
                    " document(s) in " + std::to_string(num_bytes) +
                    " bytes; train and validation need one each (add text, or split it into documents: "
                    "data.document_separator, or prepare --separator)");
  }
}

}  // namespace hwt
