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
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hwtrain/data/tokenizer.h"

namespace hwt {

class HfBpeTokenizer : public Tokenizer {
 public:
  // `json_text`: the bytes of tokenizer.json; `where` names it in errors. ConfigError naming the
  // file for what is not supported or not well formed.
  HfBpeTokenizer(std::string json_text, const std::string& where);
  // The same with the text already parsed (by a caller that looked at it first).
  HfBpeTokenizer(std::string json_text, const nlohmann::json& parsed, const std::string& where);
  ~HfBpeTokenizer() override;

  // True when a parsed tokenizer.json is Hugging Face's (it has a "model" object).
  static bool is_hf_tokenizer_json(const nlohmann::json& j);

  void encode_append(std::string_view text, std::vector<int32_t>& out) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eot_id() const override { return eot_id_; }
  std::string name() const override { return name_; }  // "hf-bpe:<crc32c of tokenizer.json>"
  const std::string& json_text() const { return json_text_; }

 private:
  struct Regex;
  void load_model(const nlohmann::json& j, const std::string& where);
  void load_added_tokens(const nlohmann::json& j, const std::string& where);
  void load_pre_tokenizer(const nlohmann::json& pre, const std::string& where);
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_word(const std::string& mapped, std::vector<int32_t>& out) const;

  std::string json_text_, name_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> is_added_id_;  // decoded literally
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
