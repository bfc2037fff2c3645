#include "hwtrain/data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "hwtrain/core/error.h"
#include "hwtrain/core/json_integer.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/utf8.h"

namespace hwt {

std::string sentencepiece_name(const std::string& model_bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "spm:%016" PRIx64, hash_bytes(model_bytes.data(), model_bytes.size()));
  return buf;
}

namespace {

using sentencepiece::SentencePieceProcessor;

constexpr const char* kMetaSpace = "\xE2\x96\x81";  // "▁", SentencePiece's escaped space

std::unique_ptr<SentencePieceProcessor> load_processor(const std::string& bytes, const std::string& source) {
  auto sp = std::make_unique<SentencePieceProcessor>();
  auto status = sp->LoadFromSerializedProto(bytes);
  if (!status.ok()) {
    throw ConfigError("data.tokenizer = '" + source + "' is not a SentencePiece model (" + status.ToString() +
                      "); give a .model file written by hwtrain tokenizer train or spm_train");
  }
  return sp;
}

// Bytes that, appended to a serialized ModelProto, set its normalization to the one a Llama
// tokenizer.json spells out (protobuf merges a repeated embedded message field by field):
// NormalizerSpec {precompiled_charsmap: "" (identity: no NFKC), add_dummy_prefix: `prefix`,
// remove_extra_whitespaces: false, escape_whitespaces: true}, TrainerSpec {treat_whitespace_as_suffix:
// false}. Llama 2's and Mistral's models already normalize so; this makes the prefix a choice.
std::string normalization_override(bool prefix) {
  // ModelProto field 3 (normalizer_spec, 8 bytes): 2 = "", 3 = prefix, 4 = false, 5 = true.
  const std::string normalizer = {0x1A, 0x08, 0x12, 0x00, 0x18, static_cast<char>(prefix), 0x20, 0x00, 0x28, 0x01};
  // ModelProto field 2 (trainer_spec, 3 bytes): 24 = false.
  const std::string trainer = {0x12, 0x03, static_cast<char>(0xC0), 0x01, 0x00};
  return normalizer + trainer;
}

[[noreturn]] void hf_unsupported(const std::string& where, const std::string& what) {
  throw ConfigError(where + ": " + what +
                    " is not supported (Hugging Face's form of a SentencePiece BPE model, as Llama 2's and Mistral's)");
}

int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

std::string type_of(const nlohmann::json& j) { return j.is_object() ? j.value("type", std::string("?")) : j.dump(); }

}  // namespace

// What Hugging Face's tokenizer.json adds to the model: added tokens, the "▁" prefix rule, Strip.
struct SentencePieceTokenizer::HfForm {
  enum class Prefix {
    kEveryPiece,    // normalizer Prepend "▁" (legacy): every piece between added tokens
    kUnlessSpaced,  // Metaspace prepend_scheme always: pieces not already starting with " " or "▁"
    kFirstPiece,    // Metaspace prepend_scheme first: that, and only at the start of the text
    kNever,
  };
  std::string json_text;
  Prefix prefix = Prefix::kNever;
  size_t strip_left = 0;  // the decoder's Strip: leading spaces removed from the decoded text
  std::vector<std::pair<std::string, int32_t>> added;  // longest first
  std::unordered_map<int32_t, std::string> added_by_id;
  bool added_first[256] = {};  // bytes an added token starts with
  std::unique_ptr<SentencePieceProcessor> with_prefix, without_prefix;

  void read_prefix_rule(const nlohmann::json& j, const std::string& where);
  void read_decoder(const nlohmann::json& d, const std::string& where);
  void read_added_tokens(const nlohmann::json& j, const std::string& where);
};

void SentencePieceTokenizer::HfForm::read_prefix_rule(const nlohmann::json& j, const std::string& where) {
  const nlohmann::json none;
  const nlohmann::json& norm = j.contains("normalizer") ? j["normalizer"] : none;
  const nlohmann::json& pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : none;
  if (!norm.is_null()) {
    if (!pre.is_null()) hf_unsupported(where, "a normalizer with pre-tokenizer '" + type_of(pre) + "'");
    const bool sequence = type_of(norm) == "Sequence";
    bool prepend = false, replace = false;
    for (const auto& s : sequence ? norm.at("normalizers") : nlohmann::json::array({norm})) {
      const std::string type = type_of(s);
      if (type == "Prepend" && s.value("prepend", "") == kMetaSpace && !prepend) {
        prepend = true;
      } else if (type == "Replace" && s.at("pattern").value("String", "") == " " &&
                 s.value("content", "") == kMetaSpace && !replace) {
        replace = true;
      } else {
        hf_unsupported(where, "normalizer '" + type + "' (" + s.dump() + ")");
      }
    }
    if (!replace) hf_unsupported(where, "a normalizer without Replace \" \" -> \"▁\"");
    prefix = prepend ? Prefix::kEveryPiece : Prefix::kNever;
    return;
  }
  if (type_of(pre) != "Metaspace" || pre.value("replacement", "") != kMetaSpace || pre.value("split", true)) {
    hf_unsupported(where, pre.is_null() ? std::string("neither normalizer nor pre-tokenizer")
                                        : "pre-tokenizer " + pre.dump() + " (Metaspace \"▁\" with split false is)");
  }
  const std::string scheme = pre.contains("prepend_scheme")        ? pre["prepend_scheme"].get<std::string>()
                             : pre.value("add_prefix_space", true) ? "always"
                                                                   : "never";
  if (scheme == "always") {
    prefix = Prefix::kUnlessSpaced;
  } else if (scheme == "first") {
    prefix = Prefix::kFirstPiece;
  } else if (scheme == "never") {
    prefix = Prefix::kNever;
  } else {
    hf_unsupported(where, "Metaspace prepend_scheme '" + scheme + "'");
  }
}

// Sequence [Replace "▁" -> " ", ByteFallback, Fuse, Strip " " (n, 0)?], as transformers writes it.
void SentencePieceTokenizer::HfForm::read_decoder(const nlohmann::json& d, const std::string& where) {
  const auto refuse = [&] {
    hf_unsupported(where, "decoder " + d.dump() + " (Sequence [Replace \"▁\" -> \" \", ByteFallback, Fuse, Strip] is)");
  };
  if (type_of(d) != "Sequence") refuse();
  const auto& steps = d.at("decoders");
  if (steps.size() < 3 || steps.size() > 4 || type_of(steps[0]) != "Replace" ||
      steps[0].at("pattern").value("String", "") != kMetaSpace || steps[0].value("content", "") != " " ||
      type_of(steps[1]) != "ByteFallback" || type_of(steps[2]) != "Fuse") {
    refuse();
  }
  if (steps.size() == 4) {
    const auto& s = steps[3];
    // Integers only (get<int>() of a float such as 1e300 is undefined behaviour); absent means 0.
    const auto count = [&](const char* key) {
      if (!s.contains(key)) return int64_t{0};
      if (!is_json_integer_in(s.at(key), 0, 1 << 20)) refuse();
      return s.at(key).get<int64_t>();
    };
    if (type_of(s) != "Strip" || s.value("content", "") != " " || count("stop") != 0) refuse();
    strip_left = static_cast<size_t>(count("start"));
  }
}

void SentencePieceTokenizer::HfForm::read_added_tokens(const nlohmann::json& j, const std::string& where) {
  for (const auto& a : j.value("added_tokens", nlohmann::json::array())) {
    const std::string content = a.at("content").get<std::string>();
    if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false)) {
      hf_unsupported(where, "added token '" + content + "' with lstrip/rstrip/single_word");
    }
    // Normalized ones are matched in the normalized text, where the pieces after them get no prefix.
    if (a.value("normalized", !a.value("special", false))) {
      hf_unsupported(where, "added token '" + content + "' with normalized: true");
    }
    if (content.empty() || !is_json_integer_in(a.at("id"), 0, (1 << 24) - 1)) {
      hf_unsupported(where, "added token " + a.dump());
    }
    const auto id = static_cast<int32_t>(a.at("id").get<int64_t>());
    added.emplace_back(content, id);
    added_by_id[id] = content;
    added_first[static_cast<unsigned char>(content[0])] = true;
  }
  std::stable_sort(added.begin(), added.end(),
                   [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_file(const std::filesystem::path& model) {
  std::string bytes;
  try {
    bytes = read_linked_file(model, 256u << 20);  // a path the user named may be a link (hub snapshots)
  } catch (const IoError& e) {
    throw ConfigError("data.tokenizer = '" + model.string() + "': cannot read the SentencePiece model (" + e.what() +
                      "); train one with hwtrain tokenizer train");
  }
  return std::make_unique<SentencePieceTokenizer>(std::move(bytes), model.string());
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_hugging_face(std::string model_bytes,
                                                                                  const std::string& model_path,
                                                                                  std::string json_text,
                                                                                  const nlohmann::json& parsed,
                                                                                  const std::string& where) {
  auto tok = std::make_unique<SentencePieceTokenizer>(std::move(model_bytes), model_path);
  tok->load_hf_form(std::move(json_text), parsed, where);
  return tok;
}

SentencePieceTokenizer::SentencePieceTokenizer(std::string model_bytes, const std::string& source)
    : sp_(load_processor(model_bytes, source)), model_bytes_(std::move(model_bytes)) {
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

void SentencePieceTokenizer::load_hf_form(std::string json_text, const nlohmann::json& j, const std::string& where) {
  auto hf = std::make_unique<HfForm>();
  try {
    const auto& m = j.at("model");
    if (type_of(m) != "BPE") hf_unsupported(where, "model.type '" + type_of(m) + "'");
    if (m.value("ignore_merges", false)) hf_unsupported(where, "model.ignore_merges");
    if (m.contains("dropout") && !m["dropout"].is_null()) hf_unsupported(where, "BPE dropout");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (m.contains(k) && !m[k].is_null() && m[k] != "") hf_unsupported(where, std::string("model.") + k);
    }
    hf->read_prefix_rule(j, where);
    hf->read_decoder(j.contains("decoder") ? j["decoder"] : nlohmann::json(), where);
    hf->read_added_tokens(j, where);
    // The vocabulary must be the model's, piece for piece (added tokens may rename theirs).
    const auto& vocab = m.at("vocab");
    if (static_cast<int64_t>(vocab.size()) != num_pieces_) {
      throw ConfigError(where + ": its vocabulary has " + std::to_string(vocab.size()) + " tokens but the " +
                        "tokenizer.model beside it has " + std::to_string(num_pieces_) +
                        " pieces; they were not converted from one another");
    }
    for (const auto& [piece, value] : vocab.items()) {
      if (!is_json_integer_in(value, 0, (1 << 24) - 1)) {
        throw ConfigError(where + ": token '" + piece + "' has id " + value.dump() + ", not an integer in [0, 2^24)");
      }
      const auto id = value.get<int64_t>();
      if (hf->added_by_id.count(static_cast<int32_t>(id))) continue;
      if (id < 0 || id >= num_pieces_ || sp_->IdToPiece(static_cast<int>(id)) != piece) {
        throw ConfigError(
            where + ": token '" + piece + "' has id " + std::to_string(id) +
            (id >= 0 && id < num_pieces_ ? ", which is '" + sp_->IdToPiece(static_cast<int>(id)) + "'" : "") +
            " in the tokenizer.model beside it; they were not converted from one another");
      }
    }
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type or missing
    throw ConfigError(where + " is not a usable tokenizer.json: " + e.what());
  }
  hf->with_prefix = load_processor(model_bytes_ + normalization_override(true), where);
  hf->without_prefix = load_processor(model_bytes_ + normalization_override(false), where);
  vocab_size_ = num_pieces_;  // and the added tokens past the model's pieces (a <pad>, say)
  for (const auto& a : hf->added) vocab_size_ = std::max<int64_t>(vocab_size_, a.second + 1);
  if (sp_->eos_id() < 0) {
    const auto it = std::find_if(hf->added.begin(), hf->added.end(), [](const auto& a) { return a.first == "</s>"; });
    if (it == hf->added.end())
      throw ConfigError(where + ": no end-of-text token (neither the model nor the added tokens have </s>)");
    eot_id_ = it->second;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "hf-spm:%016" PRIx64,
                hash_bytes(model_bytes_.data(), model_bytes_.size(), hash_bytes(json_text.data(), json_text.size())));
  name_ = buf;
  hf->json_text = std::move(json_text);
  hf_ = std::move(hf);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

const std::string& SentencePieceTokenizer::hf_json_text() const {
  static const std::string none;
  return hf_ ? hf_->json_text : none;
}

void SentencePieceTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    throw DataError("invalid UTF-8 at byte offset " + std::to_string(bad) +
                    " of the text; a SentencePiece tokenizer reads UTF-8 only (the byte tokenizer keeps any bytes)");
  }
  if (hf_) {  // added tokens first (leftmost, longest), the pieces between them through the model
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {
      if (!hf_->added_first[static_cast<unsigned char>(text[i])]) {
        ++i;
        continue;
      }
      const auto hit = std::find_if(hf_->added.begin(), hf_->added.end(),
                                    [&](const auto& a) { return text.compare(i, a.first.size(), a.first) == 0; });
      if (hit == hf_->added.end()) {
        ++i;
        continue;
      }
      encode_hf_piece(text.substr(start, i - start), start == 0, out);
      out.push_back(hit->second);
      i += hit->first.size();
      start = i;
    }
    encode_hf_piece(text.substr(start), start == 0, out);
    return;
  }
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw DataError("SentencePiece cannot encode the text: " + status.ToString());
  out.insert(out.end(), ids.begin(), ids.end());
}

void SentencePieceTokenizer::encode_hf_piece(std::string_view piece, bool at_start, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  const bool spaced = piece[0] == ' ' || piece.compare(0, 3, kMetaSpace) == 0;
  using P = HfForm::Prefix;
  const bool prefix = hf_->prefix == P::kEveryPiece || (hf_->prefix == P::kUnlessSpaced && !spaced) ||
                      (hf_->prefix == P::kFirstPiece && at_start && !spaced);
  std::vector<int> ids;
  auto status = (prefix ? hf_->with_prefix : hf_->without_prefix)->Encode(piece, &ids);
  if (!status.ok()) throw DataError("SentencePiece cannot encode the text: " + status.ToString());
  out.insert(out.end(), ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  if (hf_) return decode_hf(ids);
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

// tokenizers' decode with its decoders: each token's "▁" as " ", runs of byte tokens <0xNN> as
// their bytes when these are UTF-8 (else U+FFFD per byte token), all joined, then Strip.
std::string SentencePieceTokenizer::decode_hf(const std::vector<int32_t>& ids) const {
  std::string text, bytes, token;
  size_t num_byte_tokens = 0;
  const auto flush = [&] {
    if (num_byte_tokens == 0) return;
    if (find_invalid_utf8(bytes) == std::string::npos) {
      text += bytes;
    } else {
      for (size_t k = 0; k < num_byte_tokens; ++k) text += "\xEF\xBF\xBD";
    }
    bytes.clear();
    num_byte_tokens = 0;
  };
  for (const int32_t id : ids) {
    const auto added = hf_->added_by_id.find(id);
    if (added != hf_->added_by_id.end()) {
      token = added->second;
    } else if (id >= 0 && id < num_pieces_) {
      token = sp_->IdToPiece(id);
    } else {
      continue;  // tokenizers leaves out ids it does not know
    }
    for (size_t at = token.find(kMetaSpace); at != std::string::npos; at = token.find(kMetaSpace, at + 1)) {
      token.replace(at, 3, " ");
    }
    if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' && hex_digit(token[3]) >= 0 &&
        hex_digit(token[4]) >= 0) {
      bytes.push_back(static_cast<char>(hex_digit(token[3]) * 16 + hex_digit(token[4])));
      ++num_byte_tokens;
      continue;
    }
    flush();
    text += token;
  }
  flush();
  size_t cut = 0;
  while (cut < hf_->strip_left && cut < text.size() && text[cut] == ' ') ++cut;
  return text.substr(cut);
}

}  // namespace hwt
