#include "hwtrain/data/hf_bpe_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <nlohmann/json.hpp>

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/core/json_integer.h"
#include "hwtrain/data/bpe_merges.h"

namespace hwt {
namespace {

// GPT-2's pre-tokenizer pattern (tokenizers' ByteLevel with use_regex).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
}

[[noreturn]] void unsupported(const std::string& where, const std::string& what) {
  throw ConfigError(where + ": " + what + " is not supported (byte-level BPE tokenizers as GPT-2's and Llama 3's)");
}

}  // namespace

struct HfBpeTokenizer::Nfc {
  const icu::Normalizer2* normalizer;
};

struct HfBpeTokenizer::Regex {
  pcre2_code* code = nullptr;
  explicit Regex(const std::string& pattern, const std::string& where) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err,
                         &offset, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw ConfigError(where + ": the pre-tokenizer pattern does not compile at offset " + std::to_string(offset) +
                        ": " + reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter where JIT is missing
  }
  ~Regex() { pcre2_code_free(code); }
  // The pieces of `text`: each match and each gap between matches ("Isolated").
  void split(std::string_view text, std::vector<std::string_view>& out) const {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
    size_t pos = 0, at = 0;
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    while (at < text.size()) {
      // UTF-8 is checked once, on the first match: PCRE2 would otherwise re-check the whole subject
      // on every call (quadratic in the text).
      const int rc = pcre2_match(code, subject, text.size(), at, at == 0 ? 0 : PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        pcre2_match_data_free(md);
        throw DataError(std::string("tokenizer pre-tokenizer pattern failed at byte ") + std::to_string(at) + ": " +
                        reinterpret_cast<char*>(msg));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      size_t s = ov[0], e = ov[1];
      if (e == s) {  // an empty match: step over one character
        at = s + utf8_length(static_cast<unsigned char>(text[s]));
        continue;
      }
      if (s > pos) out.push_back(text.substr(pos, s - pos));
      out.push_back(text.substr(s, e - s));
      pos = at = e;
    }
    if (pos < text.size()) out.push_back(text.substr(pos));
    pcre2_match_data_free(md);
  }
};

bool HfBpeTokenizer::is_hf_tokenizer_json(const nlohmann::json& j) {
  return j.is_object() && j.contains("model") && j["model"].is_object();
}

namespace {

// Ids index tables: one at or above 2^24 is not a real vocabulary.
int32_t checked_id(const nlohmann::json& id, const std::string& token, const std::string& where) {
  if (!is_json_integer_in(id, 0, (1 << 24) - 1)) {
    throw ConfigError(where + ": token '" + token + "' has id " + id.dump() + ", not an integer in [0, 2^24)");
  }
  return static_cast<int32_t>(id.get<int64_t>());
}

}  // namespace

HfBpeTokenizer::HfBpeTokenizer(std::string json_text, const std::string& where)
    : HfBpeTokenizer(json_text, parse_json_bounded_or_discarded(json_text), where) {}

HfBpeTokenizer::HfBpeTokenizer(std::string json_text, const nlohmann::json& j, const std::string& where)
    : json_text_(std::move(json_text)) {
  if (j.is_discarded() || !is_hf_tokenizer_json(j)) throw ConfigError(where + " is not a tokenizer.json");
  try {
    load_model(j, where);
    load_added_tokens(j, where);
    load_pre_tokenizer(j.at("pre_tokenizer"), where);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type or missing
    throw ConfigError(where + " is not a usable tokenizer.json: " + e.what());
  }
  // GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to 256 + n.
  uint32_t n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_to_char_[b] = utf8(printable ? b : 256 + n++);
    char_to_byte_[byte_to_char_[b]] = static_cast<uint8_t>(b);
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", crc32c(json_text_.data(), json_text_.size()));
  name_ = std::string("hf-bpe:") + buf;
}

// The BPE model (vocabulary, merges and their ranks) and the normalizer.
void HfBpeTokenizer::load_model(const nlohmann::json& j, const std::string& where) {
  const auto& m = j["model"];
  if (m.value("type", "") != "BPE") unsupported(where, "model.type '" + m.value("type", std::string("?")) + "'");
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    if (j["normalizer"].value("type", "") != "NFC") unsupported(where, "a normalizer other than NFC");
    UErrorCode err = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(err);
    if (U_FAILURE(err)) throw ConfigError(where + ": ICU's NFC normalizer is unavailable: " + u_errorName(err));
    nfc_ = std::make_unique<Nfc>(Nfc{nfc});
  }
  if (m.value("byte_fallback", false)) unsupported(where, "byte_fallback");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(k) && !m[k].is_null() && m[k] != "") unsupported(where, std::string("model.") + k);
  }
  ignore_merges_ = m.value("ignore_merges", false);
  for (const auto& [token, id] : m.at("vocab").items()) vocab_[token] = checked_id(id, token, where);
  int32_t rank = 0;
  for (const auto& merge : m.at("merges")) {
    const std::string key = merge.is_string() ? merge.get<std::string>()
                                              : merge.at(0).get<std::string>() + " " + merge.at(1).get<std::string>();
    merge_rank_.emplace(key, rank++);
  }
}

// Added tokens (longest first, as they are matched), the id tables, and the end-of-text id.
void HfBpeTokenizer::load_added_tokens(const nlohmann::json& j, const std::string& where) {
  int32_t max_id = -1;
  for (const auto& [t, id] : vocab_) max_id = std::max(max_id, id);
  for (const auto& a : j.value("added_tokens", nlohmann::json::array())) {
    if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false)) {
      unsupported(where, "added token '" + a.value("content", std::string()) + "' with lstrip/rstrip/single_word");
    }
    const std::string content = a.at("content").get<std::string>();
    added_.emplace_back(content, checked_id(a.at("id"), content, where));
    max_id = std::max(max_id, added_.back().second);
  }
  std::sort(added_.begin(), added_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  is_added_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [t, id] : vocab_) id_to_token_[static_cast<size_t>(id)] = t;
  for (const auto& [t, id] : added_) {
    id_to_token_[static_cast<size_t>(id)] = t;
    is_added_id_[static_cast<size_t>(id)] = true;
    if (!t.empty()) added_first_[static_cast<unsigned char>(t[0])] = true;
  }
  vocab_size_ = max_id + 1;
  for (const char* eot : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>"}) {
    auto it = std::find_if(added_.begin(), added_.end(), [&](const auto& a) { return a.first == eot; });
    if (it != added_.end()) {
      eot_id_ = it->second;
      return;
    }
  }
  throw ConfigError(where + ": no end-of-text token among the added tokens (<|endoftext|>, ...)");
}

// A ByteLevel, or a Sequence of one Split (Isolated Regex) and a ByteLevel.
void HfBpeTokenizer::load_pre_tokenizer(const nlohmann::json& pre, const std::string& where) {
  std::vector<nlohmann::json> steps;
  if (pre.value("type", "") == "Sequence") {
    for (const auto& p : pre.at("pretokenizers")) steps.push_back(p);
  } else {
    steps.push_back(pre);
  }
  bool byte_level = false;
  for (const auto& p : steps) {
    const std::string type = p.value("type", "");
    if (type == "Split") {
      if (p.value("behavior", "") != "Isolated" || p.value("invert", false) || !p.at("pattern").contains("Regex")) {
        unsupported(where, "a Split pre-tokenizer other than an Isolated Regex");
      }
      if (regex_ || byte_level) unsupported(where, "more than one splitting pattern");
      regex_ = std::make_unique<Regex>(p["pattern"]["Regex"].get<std::string>(), where);
    } else if (type == "ByteLevel") {
      byte_level = true;
      add_prefix_space_ = p.value("add_prefix_space", false);
      if (p.value("use_regex", true)) {
        if (regex_) unsupported(where, "more than one splitting pattern");
        regex_ = std::make_unique<Regex>(kGpt2Pattern, where);
      }
    } else {
      unsupported(where, "pre-tokenizer '" + type + "'");
    }
  }
  if (!byte_level) unsupported(where, "a pre-tokenizer without ByteLevel");
}

HfBpeTokenizer::~HfBpeTokenizer() = default;

void HfBpeTokenizer::encode_word(const std::string& mapped, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    auto it = vocab_.find(mapped);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<std::string> sym;
  for (size_t i = 0; i < mapped.size();) {
    const size_t len = utf8_length(static_cast<unsigned char>(mapped[i]));
    sym.push_back(mapped.substr(i, len));
    i += len;
  }
  merge_bpe_symbols(sym, merge_rank_);
  for (const auto& s : sym) {
    auto it = vocab_.find(s);
    if (it == vocab_.end()) throw DataError("tokenizer " + name_ + ": the BPE piece '" + s + "' is not in its vocabulary");
    out.push_back(it->second);
  }
}

void HfBpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  std::string normalized;  // NFC (Qwen2), through ICU; text already in NFC is left as it is
  if (nfc_) {
    UErrorCode err = U_ZERO_ERROR;
    const icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(piece.data(), static_cast<int32_t>(piece.size())));
    if (!nfc_->normalizer->isNormalized(u, err) && U_SUCCESS(err)) {
      nfc_->normalizer->normalize(u, err).toUTF8String(normalized);
      if (U_SUCCESS(err)) piece = normalized;
    }
  }
  std::string prefixed;  // ByteLevel's add_prefix_space applies to each segment between added tokens
  if (add_prefix_space_ && piece.front() != ' ') {
    prefixed = " " + std::string(piece);
    piece = prefixed;
  }
  std::vector<std::string_view> words;
  if (regex_) {
    regex_->split(piece, words);
  } else {
    words.push_back(piece);
  }
  std::string mapped;
  for (const auto w : words) {
    mapped.clear();
    for (const char c : w) mapped += byte_to_char_[static_cast<unsigned char>(c)];
    encode_word(mapped, out);
  }
}

void HfBpeTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    if (!added_first_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    const auto hit = std::find_if(added_.begin(), added_.end(), [&](const auto& a) {
      return !a.first.empty() && text.compare(i, a.first.size(), a.first) == 0;
    });
    if (hit == added_.end()) {
      ++i;
      continue;
    }
    if (i > start) encode_piece(text.substr(start, i - start), out);
    out.push_back(hit->second);
    i += hit->first.size();
    start = i;
  }
  if (start < text.size()) encode_piece(text.substr(start), out);
}

std::string HfBpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) continue;  // e.g. padding rows of the model
    const std::string& token = id_to_token_[static_cast<size_t>(id)];
    if (is_added_id_[static_cast<size_t>(id)]) {
      out += token;
      continue;
    }
    for (size_t i = 0; i < token.size();) {
      const size_t len = utf8_length(static_cast<unsigned char>(token[i]));
      const auto it = char_to_byte_.find(token.substr(i, len));
      if (it != char_to_byte_.end()) {
        out += static_cast<char>(it->second);
      } else {
        out += token.substr(i, len);
      }
      i += len;
    }
  }
  return out;
}

}  // namespace hwt
