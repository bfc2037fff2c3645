// SentencePieceTokenizer: a Tokenizer over a SentencePiece model (BPE or unigram), such as the
// ones `hwtrain tokenizer train` writes. Its name is "spm:<16 hex digits>", a hash of the model
// file's bytes, so token files, datasets and checkpoints of different models never match by name.
// End-of-text is the model's </s> (eos) when it has one, else one id reserved after its pieces.
//
// from_hugging_face: the model as Hugging Face's fast tokenizer uses it in a Llama 2 or Mistral
// directory (the tokenizer.json transformers converted from it), with the same ids and decoded text
// (tests/data/hf_sentencepiece_test.cpp): added tokens (<s>, </s>, <unk>) are split out first; each
// piece between them gets the "▁" prefix as the tokenizer.json says (legacy normalizer Prepend "▁":
// every piece, as Llama 2 ships it; Metaspace prepend_scheme always / first / never), spaces become
// "▁", nothing else is normalized. Decoding is tokenizers' decode(skip_special_tokens=False): added
// tokens literally ("</s>" too), byte pieces fused, its Strip of a leading space. No <s> is added.
// Named "hf-spm:<hash of both files>". Refused by name (ConfigError): other models, normalizers,
// pre-tokenizers or decoders, added tokens that strip or are normalized, a vocabulary not the model's.
#pragma once
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "hwtrain/data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace hwt {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Loads a model file; ConfigError naming it when it cannot be read or is not a model.
  static std::unique_ptr<SentencePieceTokenizer> from_file(const std::filesystem::path& model);
  // Hugging Face's form of `model_bytes` (the file `model_path`, see above): `json_text` is its
  // tokenizer.json, already parsed as `parsed`; `where` names it in errors (ConfigError for what is
  // not supported).
  static std::unique_ptr<SentencePieceTokenizer> from_hugging_face(std::string model_bytes,
                                                                   const std::string& model_path, std::string json_text,
                                                                   const nlohmann::json& parsed,
                                                                   const std::string& where);
  // From the bytes of a model file; `source` names it in errors.
  SentencePieceTokenizer(std::string model_bytes, const std::string& source);
  ~SentencePieceTokenizer() override;

  // DataError "invalid UTF-8 at byte offset N of the text" on bytes that are not UTF-8: the
  // model would turn them into <unk> silently.
  void encode_append(std::string_view text, std::vector<int32_t>& out) const override;
  // End-of-text decodes to "\n"; ids outside the vocabulary (a padded model can sample them)
  // decode to U+FFFD. The Hugging Face form decodes as tokenizers does (above; unknown ids: nothing).
  std::string decode(const std::vector<int32_t>& ids) const override;

  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eot_id() const override { return eot_id_; }
  std::string name() const override { return name_; }

  int64_t num_pieces() const { return num_pieces_; }
  uint64_t fingerprint() const { return fingerprint_; }
  // The model file's bytes, exactly as loaded (copies keep the fingerprint).
  const std::string& model_bytes() const { return model_bytes_; }
  // The Hugging Face form's tokenizer.json, unchanged; empty for a plain model.
  const std::string& hf_json_text() const;

 private:
  struct HfForm;
  void load_hf_form(std::string json_text, const nlohmann::json& j, const std::string& where);
  void encode_hf_piece(std::string_view piece, bool at_start, std::vector<int32_t>& out) const;
  std::string decode_hf(const std::vector<int32_t>& ids) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string model_bytes_;
  uint64_t fingerprint_ = 0;
  std::string name_;
  int64_t num_pieces_ = 0, vocab_size_ = 0;
  int32_t eot_id_ = 0;
  std::unique_ptr<HfForm> hf_;  // null: a plain model
};

// "spm:" followed by the 16 hex digits of the hash of a model file's bytes.
std::string sentencepiece_name(const std::string& model_bytes);

}  // namespace hwt
