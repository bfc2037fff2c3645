#include "hwtrain/data/tokenizer_trainer.h"

#include <sentencepiece_trainer.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/corpus_reader.h"
#include "hwtrain/data/sentencepiece_tokenizer.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/tokenizer_files.h"
#include "hwtrain/data/utf8.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace fs = std::filesystem;

void TokenizerTrainOptions::validate() const {
  read.validate();
  if (model_type != "bpe" && model_type != "unigram") {
    throw ConfigError("--model-type = '" + model_type + "' is not supported" +
                      did_you_mean(model_type, {"bpe", "unigram"}) + "; valid: bpe, unigram");
  }
  if (vocab_size < 16 || vocab_size > (int64_t{1} << 31)) {
    throw ConfigError("--vocab-size = " + std::to_string(vocab_size) + " is out of range; valid: 16 .. 2^31");
  }
  if (!(character_coverage > 0.9 && character_coverage <= 1.0)) {
    throw ConfigError("--character-coverage = " + std::to_string(character_coverage) +
                      " is out of range; valid: (0.9, 1] (1.0 for small alphabets)");
  }
  check_data_threads(num_threads);
  if (max_sentences < 1) throw ConfigError("--max-sentences must be >= 1");
  if (max_sentence_bytes < 64) throw ConfigError("max_sentence_bytes must be >= 64");
}

namespace {

// Feeds the corpus to SentencePiece one line-aligned piece of at most max_bytes at a time.
class CorpusSentences : public sentencepiece::SentenceIterator {
 public:
  CorpusSentences(CorpusReader& reader, const TokenizerTrainOptions& o, TokenizerTrainStats& stats)
      : reader_(reader), o_(o), stats_(stats) {
    advance();
  }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return status_; }
  const std::exception_ptr& error() const { return error_; }

 private:
  void advance() {
    try {
      for (;;) {
        if (!rest_.empty()) {
          cut_sentence();
          if (!value_.empty()) return;
          continue;
        }
        if (piece_ < chunk_.pieces.size()) {
          rest_ = chunk_.piece_text(piece_);
          check_utf8(rest_, piece_++);
          ++stats_.num_documents;
          continue;
        }
        if (!reader_.next(chunk_)) {
          done_ = true;
          return;
        }
        if (chunk_.jsonl) parse_jsonl_chunk(chunk_, o_.read.jsonl_field, o_.read.max_document_bytes, o_.read.strict);
        stats_.num_bad_lines += chunk_.num_bad_lines;
        piece_ = 0;
      }
    } catch (...) {
      // SentencePiece's iterator cannot throw through its trainer: stop, and rethrow afterwards.
      error_ = std::current_exception();
      status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kAborted, "corpus read error");
      done_ = true;
    }
  }
  // SentencePiece reads UTF-8 only (prepare refuses other bytes with such a tokenizer): refused here
  // too, at the same place, rather than trained on and refused later.
  void check_utf8(std::string_view text, size_t piece) const {
    const size_t bad = find_invalid_utf8(text);
    if (bad == std::string_view::npos) return;
    throw DataError("invalid UTF-8 in " + chunk_.piece_location(piece, bad) + ": a SentencePiece tokenizer reads UTF-8 only; fix the file, "
                    "or train with the byte tokenizer (data.tokenizer = byte), which keeps any bytes");
  }
  void cut_sentence() {
    const size_t max = static_cast<size_t>(o_.max_sentence_bytes);
    size_t cut = rest_.size();
    if (cut > max) {
      const void* nl = ::memrchr(rest_.data(), '\n', max);
      cut = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - rest_.data()) + 1 : max;
      while (cut > 1 && (static_cast<unsigned char>(rest_[cut]) & 0xC0) == 0x80) --cut;
    }
    value_.assign(rest_.data(), cut);
    rest_.remove_prefix(cut);
    if (is_blank(value_)) {
      value_.clear();
      return;
    }
    ++stats_.num_sentences;
  }

  CorpusReader& reader_;
  const TokenizerTrainOptions& o_;
  TokenizerTrainStats& stats_;
  CorpusChunk chunk_;
  size_t piece_ = 0;
  std::string_view rest_;
  std::string value_;
  bool done_ = false;
  sentencepiece::util::Status status_;
  std::exception_ptr error_;
};

// SentencePiece's serialized model trained on `reader`'s text (stats filled in), or the error.
std::string train_model(const std::vector<fs::path>& inputs, CorpusReader& reader, const TokenizerTrainOptions& options,
                        TokenizerTrainStats& stats, bool& byte_fallback) {
  byte_fallback = options.byte_fallback;
  if (byte_fallback && options.vocab_size < 512) {
    log_warn("tokenizer: byte fallback needs 256 of the {} pieces; training without it (characters the model does not "
             "cover become <unk>; use --vocab-size 512 or more to keep every text)",
             options.vocab_size);
    byte_fallback = false;
  }
  int threads = static_cast<int>(options.num_threads);
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"byte_fallback", byte_fallback ? "true" : "false"},
      // Exact round trips: no normalization, whitespace as written, no dummy prefix per document.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"user_defined_symbols", "\n"},
      {"unk_id", "0"},
      {"eos_id", "1"},  // end-of-text
      {"bos_id", "-1"},
      {"pad_id", "-1"},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", std::to_string(2 * options.max_sentence_bytes)},
      {"num_threads", std::to_string(threads)},
      {"hard_vocab_limit", "false"},
      {"minloglevel", "2"},
  };
  CorpusSentences sentences(reader, options, stats);
  std::string model;
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &sentences, &model);
  if (sentences.error()) std::rethrow_exception(sentences.error());
  stats.num_files = reader.stats().num_files;
  stats.num_bytes = reader.stats().num_bytes;
  if (stats.num_sentences == 0) {
    throw DataError("corpus " + (inputs.empty() ? std::string("") : inputs.front().string()) +
                    (inputs.size() > 1 ? " ..." : "") + " is empty: " + std::to_string(stats.num_files) +
                    " file(s), " + std::to_string(stats.num_bytes) + " bytes, no non-blank text to train on");
  }
  if (!status.ok()) {
    // SentencePiece's own hints name its flags; hwtrain's spelling, and which way to go.
    const std::string text = status.ToString();
    const std::string hint = text.find("required_chars") != std::string::npos
                                 ? "a larger --vocab-size (one piece per character at least), or a "
                                   "--character-coverage below 1"
                                 : "a smaller --vocab-size or a larger corpus";
    throw ConfigError("SentencePiece cannot train a " + options.model_type + " model of " +
                      std::to_string(options.vocab_size) + " pieces on this corpus: " + text + "; try " + hint);
  }
  return model;
}

// A directory whose other files depend on the tokenizer it holds (a dataset's shards were encoded
// with it, a model's embeddings index its ids) is not overwritten: a new tokenizer would silently
// break them. A model directory without a tokenizer may be given one.
void refuse_dependent_output(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  const bool has_tokenizer = fs::exists(dir / kTokenizerModelFile, ec) || fs::exists(dir / kTokenizerJsonFile, ec) ||
                             fs::exists(dir / "vocab.json", ec);  // GPT-2's vocab.json + merges.txt
  const char* what = nullptr;
  if (is_dataset_dir(dir)) {
    what = "a dataset hwtrain prepare wrote (its shards were encoded with its tokenizer)";
  } else if (has_tokenizer && fs::exists(dir / "config.json", ec)) {
    what = "a model directory with a tokenizer (its embeddings index that tokenizer's ids)";
  } else if (has_tokenizer && fs::exists(dir / "trainer_state.json", ec)) {
    what = "a training checkpoint with its tokenizer";
  }
  if (what != nullptr) {
    throw ConfigError("--output " + dir.string() + " is " + what + ": training a tokenizer there would replace "
                      "the one it depends on; give a new directory");
  }
}

}  // namespace

TokenizerTrainStats train_tokenizer(const std::vector<fs::path>& inputs, const fs::path& output_dir,
                                    const TokenizerTrainOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  options.validate();
  CorpusReader reader(list_corpus_files(inputs, CorpusFilter{options.read.include, options.read.exclude}),
                      options.read);
  refuse_dependent_output(output_dir);
  const bool existed = fs::exists(output_dir);
  ensure_writable_dir(output_dir);  // before the (long) training, not after
  TokenizerTrainStats stats;
  bool byte_fallback = false;
  std::string model;
  try {
    model = train_model(inputs, reader, options, stats, byte_fallback);
  } catch (...) {
    std::error_code ignored;  // a directory made for this run goes again (it is empty: nothing was written)
    if (!existed) fs::remove(output_dir, ignored);
    throw;
  }
  SentencePieceTokenizer tok(model, "the trained model");
  nlohmann::json extra = {{"model_type", options.model_type},
                          {"trained_on",
                           {{"files", stats.num_files},
                            {"bytes", stats.num_bytes},
                            {"sentences", stats.num_sentences},
                            {"character_coverage", options.character_coverage},
                            {"byte_fallback", byte_fallback}}}};
  save_tokenizer(tok, output_dir, extra);
  stats.model = output_dir / kTokenizerModelFile;
  stats.name = tok.name();
  stats.vocab_size = tok.vocab_size();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

std::string describe(const TokenizerTrainStats& s) {
  std::ostringstream out;
  out << s.name << " (" << s.vocab_size << " ids) from " << s.num_files << " files, "
      << format_bytes(static_cast<double>(s.num_bytes)) << ", " << s.num_documents << " documents, " << s.num_sentences
      << " sentences in " << s.seconds << " s";
  if (s.num_bad_lines > 0) out << ", " << s.num_bad_lines << " bad JSONL lines skipped";
  return out.str();
}

}  // namespace hwt
