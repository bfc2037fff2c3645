#include "hwtrain/data/tokenizer_files.h"

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/data/byte_tokenizer.h"
#include "hwtrain/data/hf_bpe_tokenizer.h"
#include "hwtrain/data/sentencepiece_tokenizer.h"

namespace hwt {

namespace fs = std::filesystem;

namespace {

// hwtrain's tokenizer.json is a few hundred bytes, Hugging Face's several MB (GPT-2's 1.4, Llama 2's
// 1.8, Llama 3's 9); SentencePiece models of 256k pieces are ~5 MB.
constexpr uint64_t kMaxTokenizerJsonBytes = 64u << 20;
constexpr uint64_t kMaxTokenizerModelBytes = 256u << 20;

// The model file tokenizer.json names: a plain name inside the tokenizer's own directory (whose
// files a checkpoint's COMPLETE or a dataset manifest checksums), never a path elsewhere.
fs::path model_file(const nlohmann::json& j, const fs::path& json_path) {
  if (!j.contains("file")) return json_path.parent_path() / kTokenizerModelFile;
  if (!j["file"].is_string() || !is_path_inside_dir(j["file"].get<std::string>())) {
    throw DataError(json_path.string() + ": \"file\" is " + j["file"].dump() + "; it must name a file inside " +
                    json_path.parent_path().string() + " (such as \"" + kTokenizerModelFile + "\")");
  }
  return json_path.parent_path() / j["file"].get<std::string>();
}

}  // namespace

nlohmann::json describe_tokenizer(const Tokenizer& tok) {
  nlohmann::json j = {{"name", tok.name()}, {"vocab_size", tok.vocab_size()}, {"eot_id", tok.eot_id()}};
  if (dynamic_cast<const HfBpeTokenizer*>(&tok)) {
    j["type"] = "hf-bpe";
  } else if (const auto* spm = dynamic_cast<const SentencePieceTokenizer*>(&tok)) {
    j["type"] = spm->hf_json_text().empty() ? "sentencepiece" : "hf-sentencepiece";
    j["file"] = kTokenizerModelFile;
    j["num_pieces"] = spm->num_pieces();
  } else {
    j["type"] = tok.is_byte_level() ? "byte" : "unknown";
  }
  return j;
}

void save_tokenizer(const Tokenizer& tok, const fs::path& dir, const nlohmann::json& extra) {
  if (const auto* hf = dynamic_cast<const HfBpeTokenizer*>(&tok)) {  // Hugging Face's own file, unchanged
    ensure_writable_dir(dir);
    write_file_atomic(dir / kTokenizerJsonFile, hf->json_text());
    return;
  }
  const auto* spm = dynamic_cast<const SentencePieceTokenizer*>(&tok);
  if (spm && !spm->hf_json_text().empty()) {  // Llama 2, Mistral: both of Hugging Face's files, unchanged
    ensure_writable_dir(dir);
    write_file_atomic(dir / kTokenizerModelFile, spm->model_bytes());
    write_file_atomic(dir / kTokenizerJsonFile, spm->hf_json_text());
    return;
  }
  nlohmann::json j = describe_tokenizer(tok);
  if (j["type"] == "unknown") {
    throw ConfigError("tokenizer '" + tok.name() + "' cannot be saved: only byte and SentencePiece tokenizers can");
  }
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  ensure_writable_dir(dir);
  if (spm) write_file_atomic(dir / kTokenizerModelFile, spm->model_bytes());
  write_file_atomic(dir / kTokenizerJsonFile, j.dump(2) + "\n");
}

bool holds_tokenizer(const fs::path& dir) {
  std::error_code ec;
  return has_tokenizer_files(dir) || fs::is_regular_file(dir / kTokenizerModelFile, ec);
}

bool has_tokenizer_files(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kTokenizerJsonFile, ec);
}

std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& dir) {
  const fs::path json_path = dir / kTokenizerJsonFile;
  std::string text;
  try {
    text = read_linked_file(json_path, kMaxTokenizerJsonBytes);  // a hub snapshot's links to its blobs
  } catch (const IoError& e) {
    throw DataError("no tokenizer in " + dir.string() + " (" + e.what() + ")");
  }
  nlohmann::json j = parse_json_bounded_or_discarded(text);
  if (!j.is_discarded() && HfBpeTokenizer::is_hf_tokenizer_json(j)) {
    try {
      return std::make_unique<HfBpeTokenizer>(text, j, json_path.string());  // a copy: the fallback needs it
    } catch (const ConfigError& e) {
      // Llama 2 and Mistral directories: a tokenizer.json of SentencePiece's kind (byte_fallback,
      // normalizers) beside the tokenizer.model it was converted from: SentencePiece encodes, as
      // the tokenizer.json says (sentencepiece_tokenizer.h).
      const fs::path model = dir / kTokenizerModelFile;
      std::error_code ec;
      if (!fs::is_regular_file(model, ec)) throw DataError(e.what());
      try {
        return SentencePieceTokenizer::from_hugging_face(read_linked_file(model, kMaxTokenizerModelBytes),
                                                         model.string(), std::move(text), j, json_path.string());
      } catch (const Error& spm) {
        throw DataError(std::string(e.what()) + "; and as the tokenizer.model beside it: " + spm.what());
      }
    }
  }
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j.contains("type") || !j["name"].is_string() ||
      !j["type"].is_string()) {
    throw DataError(json_path.string() + " is not a tokenizer description (it needs string fields name and type)");
  }
  const std::string type = j["type"], name = j["name"];
  std::unique_ptr<Tokenizer> tok;
  if (type == "byte") {
    tok = std::make_unique<ByteTokenizer>();
  } else if (type == "sentencepiece") {
    const fs::path model = model_file(j, json_path);
    std::string bytes;
    try {
      bytes = read_regular_file(model, kMaxTokenizerModelBytes);
    } catch (const IoError& e) {
      throw DataError(json_path.string() + " names the SentencePiece model " + model.string() +
                      ", which cannot be read (" + e.what() + ")");
    }
    try {
      tok = std::make_unique<SentencePieceTokenizer>(std::move(bytes), model.string());
    } catch (const ConfigError& e) {
      throw DataError(e.what());
    }
  } else {
    throw DataError(json_path.string() + ": tokenizer type '" + type + "' is unknown; valid: byte, sentencepiece");
  }
  if (tok->name() != name) {
    throw DataError(json_path.string() + " describes tokenizer '" + name + "' but its model file is '" + tok->name() +
                    "' (the model was replaced); copy the matching tokenizer.model back or re-run hwtrain prepare");
  }
  if (j.contains("vocab_size") && j["vocab_size"] != tok->vocab_size()) {
    throw DataError(json_path.string() + " says vocab_size " + j["vocab_size"].dump() + " but the tokenizer has " +
                    std::to_string(tok->vocab_size()));
  }
  if (j.contains("eot_id") && j["eot_id"] != tok->eot_id()) {
    throw DataError(json_path.string() + " says eot_id " + j["eot_id"].dump() + " but the tokenizer has " +
                    std::to_string(tok->eot_id()));
  }
  return tok;
}

}  // namespace hwt
