#include "hwtrain/data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <cinttypes>
#include <cstdio>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/utf8.h"

namespace hwt {

std::string sentencepiece_name(const std::string& model_bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "spm:%016" PRIx64, hash_bytes(model_bytes.data(), model_bytes.size()));
  return buf;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_file(const std::filesystem::path& model) {
  std::string bytes;
  try {
    bytes = read_file(model);
  } catch (const IoError& e) {
    throw ConfigError("data.tokenizer = '" + model.string() + "': cannot read the SentencePiece model (" + e.what() +
                      "); train one with hwtrain tokenizer train");
  }
  return std::make_unique<SentencePieceTokenizer>(std::move(bytes), model.string());
}

SentencePieceTokenizer::SentencePieceTokenizer(std::string model_bytes, const std::string& source)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), model_bytes_(std::move(model_bytes)) {
  auto status = sp_->LoadFromSerializedProto(model_bytes_);
  if (!status.ok()) {
    throw ConfigError("data.tokenizer = '" + source + "' is not a SentencePiece model (" + status.ToString() +
                      "); give a .model file written by hwtrain tokenizer train or spm_train");
  }
  fingerprint_ = hash_bytes(model_bytes_.data(), model_bytes_.size());
  name_ = sentencepiece_name(model_bytes_);
  num_pieces_ = sp_->GetPieceSize();
  if (sp_->eos_id() >= 0) {
    eot_id_ = sp_->eos_id();
    vocab_size_ = num_pieces_;
  } else {
    eot_id_ = static_cast<int32_t>(num_pieces_);  // reserved: the model has no </s>
    vocab_size_ = num_pieces_ + 1;
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    throw DataError("invalid UTF-8 at byte offset " + std::to_string(bad) +
                    " of the text; a SentencePiece tokenizer reads UTF-8 only (the byte tokenizer keeps any bytes)");
  }
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw DataError("SentencePiece cannot encode the text: " + status.ToString());
  out.insert(out.end(), ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  std::vector<int> run;
  auto flush = [&] {
    if (run.empty()) return;
    std::string piece;
    if (sp_->Decode(run, &piece).ok()) text += piece;
    run.clear();
  };
  for (int32_t id : ids) {
    if (id == eot_id_) {
      flush();
      text.push_back('\n');
    } else if (id >= 0 && id < num_pieces_) {
      run.push_back(id);
    } else {
      flush();
      text += "\xEF\xBF\xBD";  // U+FFFD
    }
  }
  flush();
  return text;
}

}  // namespace hwt
