// HfBpeTokenizer: a Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2, Llama 3, and
// tokenizers' ByteLevelBPE), encoding and decoding as the `tokenizers` library does: added tokens
// split out first, then the pre-tokenizer (ByteLevel with GPT-2's regex, or a Split regex before
// ByteLevel as Llama 3 writes it) through PCRE2 in Unicode mode, bytes mapped to GPT-2's printable
// characters, BPE merges by rank (ignore_merges: a word in the vocabulary is one token). Decoding
// joins the tokens, added ones literally, and maps the characters back to bytes.
// An NFC normalizer (Qwen2's) runs through ICU on the text between added tokens.
// Refused by name (ConfigError): other models (WordPiece, Unigram), other normalizers, byte_fallback,
// subword prefixes/suffixes, added tokens that strip or match single words.
// eot_id: the first of <|endoftext|>, <|end_of_text|>, </s>, <|im_end|> among the added tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hwtrain/data/tokenizer.h"

namespace hwt {

class HfBpeTokenizer : public Tokenizer {
 public:
  // `json_text`: the bytes of tokenizer.json; `where` names it in errors.
  HfBpeTokenizer(std::string json_text, const std::string& where);
  ~HfBpeTokenizer() override;

  // True when `json_text` looks like a Hugging Face tokenizer.json (a "model" object).
  static bool is_hf_tokenizer_json(const std::string& json_text);

  void encode_append(std::string_view text, std::vector<int32_t>& out) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eot_id() const override { return eot_id_; }
  std::string name() const override { return name_; }  // "hf-bpe:<crc32c of tokenizer.json>"
  const std::string& json_text() const { return json_text_; }

 private:
  struct Regex;
  void load(const std::string& where);
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_word(const std::string& mapped, std::vector<int32_t>& out) const;

  std::string json_text_, name_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
  std::vector<std::pair<std::string, int32_t>> added_;   // longest first
  std::unique_ptr<Regex> regex_;                         // null: no splitting
  bool add_prefix_space_ = false, ignore_merges_ = false;
  bool added_first_[256] = {};  // bytes an added token starts with
  struct Nfc;                  // ICU's NFC normalizer (Qwen2's)
  std::unique_ptr<Nfc> nfc_;   // or none
  std::string byte_to_char_[256];
  std::unordered_map<std::string, uint8_t> char_to_byte_;
  int64_t vocab_size_ = 0;
  int32_t eot_id_ = -1;
};

}  // namespace hwt
