// SentencePieceTokenizer: a Tokenizer over a SentencePiece model (BPE or unigram), such as the
// ones `hwtrain tokenizer train` writes. Its name is "spm:<16 hex digits>", a hash of the model
// file's bytes, so token files, datasets and checkpoints of different models never match by name.
// End-of-text is the model's </s> (eos) when it has one, else one id reserved after its pieces.
#pragma once
#include <filesystem>
#include <memory>
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
  // From the bytes of a model file; `source` names it in errors.
  SentencePieceTokenizer(std::string model_bytes, const std::string& source);
  ~SentencePieceTokenizer() override;

  // DataError "invalid UTF-8 at byte offset N of the text" on bytes that are not UTF-8: the
  // model would turn them into <unk> silently.
  void encode_append(std::string_view text, std::vector<int32_t>& out) const override;
  // End-of-text decodes to "\n"; ids outside the vocabulary (a padded model can sample them)
  // decode to U+FFFD.
  std::string decode(const std::vector<int32_t>& ids) const override;

  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eot_id() const override { return eot_id_; }
  std::string name() const override { return name_; }

  int64_t num_pieces() const { return num_pieces_; }
  uint64_t fingerprint() const { return fingerprint_; }
  // The model file's bytes, exactly as loaded (copies keep the fingerprint).
  const std::string& model_bytes() const { return model_bytes_; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string model_bytes_;
  uint64_t fingerprint_ = 0;
  std::string name_;
  int64_t num_pieces_ = 0, vocab_size_ = 0;
  int32_t eot_id_ = 0;
};

// "spm:" followed by the 16 hex digits of the hash of a model file's bytes.
std::string sentencepiece_name(const std::string& model_bytes);

}  // namespace hwt
