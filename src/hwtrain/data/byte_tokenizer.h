// ByteTokenizer: the default tokenizer. Ids 0..255 are the bytes of the text, 256 is end-of-text;
// vocabulary 257. Any byte string round-trips exactly, including invalid UTF-8 (kept as bytes).
#pragma once
#include "hwtrain/data/tokenizer.h"

namespace hwt {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kEotId = 256;
  static constexpr int64_t kVocabSize = 257;

  void encode_append(std::string_view text, std::vector<int32_t>& out) const override;
  // End-of-text decodes to "\n": in generated samples a document break reads as a line break.
  // Ids outside [0, 257) (a model's vocabulary is padded to a multiple of 64, so it can sample
  // them) decode to U+FFFD, the replacement character, rather than throwing mid-generation.
  std::string decode(const std::vector<int32_t>& ids) const override;

  int64_t vocab_size() const override { return kVocabSize; }
  int32_t eot_id() const override { return kEotId; }
  std::string name() const override { return "byte"; }
  bool is_byte_level() const override { return true; }
};

}  // namespace hwt
