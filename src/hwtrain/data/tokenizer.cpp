#include "hwtrain/data/tokenizer.h"

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/byte_tokenizer.h"

namespace hwt {

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  std::string hint = did_you_mean(spec, {"byte"});
  if (spec.size() > 6 && spec.compare(spec.size() - 6, 6, ".model") == 0) {
    hint = " (SentencePiece models are not supported by this build yet)";
  }
  throw ConfigError("data.tokenizer = '" + spec + "' is not a known tokenizer" + hint + "; valid: 'byte'");
}

}  // namespace hwt
