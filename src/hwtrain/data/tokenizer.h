// Tokenizer: the interface every tokenizer of hwtrain implements (byte-level, SentencePiece), and
// make_tokenizer(), which builds one from the data.tokenizer spec. Implementations are immutable
// after construction: encode/decode may run on several threads at once.
// A tokenizer maps text to ids in [0, vocab_size()) and back; eot_id() is the end-of-text id
// placed between documents, never produced by encode().
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hwt {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of `text` to `out` (no end-of-text id). One call per document, so even a
  // byte tokenizer pays one virtual call per document, not per byte.
  virtual void encode_append(std::string_view text, std::vector<int32_t>& out) const = 0;
  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids;
    encode_append(text, ids);
    return ids;
  }
  // Text of `ids`; never throws on ids the model may sample (see each implementation).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;

  virtual int64_t vocab_size() const = 0;
  virtual int32_t eot_id() const = 0;
  // Stored in token files and checkpoints: "byte", or "spm:<hash of the model file>".
  virtual std::string name() const = 0;
  // True when id == byte value for every byte and encode is the identity: prepare then skips the
  // id vector and converts bytes straight into the token file.
  virtual bool is_byte_level() const { return false; }
};

// "byte" -> ByteTokenizer; a file -> SentencePieceTokenizer of that model; a directory -> the
// tokenizer saved there (tokenizer_files.h: `hwtrain tokenizer train` output, a dataset, a
// checkpoint). Anything else is a ConfigError naming data.tokenizer and the valid specs.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);

}  // namespace hwt
