#include "hwtrain/data/tokenizer.h"

#include <filesystem>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/byte_tokenizer.h"
#include "hwtrain/data/sentencepiece_tokenizer.h"
#include "hwtrain/data/tokenizer_files.h"

namespace hwt {

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path(spec);
  if (!spec.empty() && fs::is_directory(path, ec)) {
    if (has_tokenizer_files(path)) {
      try {
        return load_tokenizer(path);
      } catch (const DataError& e) {
        throw ConfigError("data.tokenizer = '" + spec + "': " + e.what());
      }
    }
    if (fs::is_regular_file(path / kTokenizerModelFile, ec)) return SentencePieceTokenizer::from_file(path / kTokenizerModelFile);
    throw ConfigError("data.tokenizer = '" + spec + "' is a directory without tokenizer.json or tokenizer.model; "
                      "give the directory hwtrain tokenizer train wrote, or a .model file");
  }
  if (path.filename() == "tokenizer.json" && fs::is_regular_file(path, ec)) {  // a Hugging Face file: its directory
    return make_tokenizer(path.has_parent_path() ? path.parent_path().string() : ".");
  }
  if (!spec.empty() && fs::is_regular_file(path, ec)) return SentencePieceTokenizer::from_file(path);
  std::string hint = did_you_mean(spec, {"byte"});
  if (spec.size() > 6 && spec.compare(spec.size() - 6, 6, ".model") == 0) hint = " (no such file)";
  throw ConfigError("data.tokenizer = '" + spec + "' is not a known tokenizer" + hint +
                    "; valid: 'byte', a SentencePiece .model file, or a directory from hwtrain tokenizer train");
}

}  // namespace hwt
