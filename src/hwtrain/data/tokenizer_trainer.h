// train_tokenizer(): trains a SentencePiece BPE or unigram model on a corpus (the same inputs as
// prepare: text files, directories with include/exclude globs, JSONL, standard input) and writes
// DIR/tokenizer.model and DIR/tokenizer.json (tokenizer_files.h). Documents stream through
// SentencePiece's sentence iterator in line-aligned pieces; SentencePiece keeps a uniform sample of
// at most max_sentences of them, so memory stays bounded. The model is set up to round-trip text
// exactly: no normalization, whitespace kept, "\n" a piece of its own, unknown characters as bytes.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "hwtrain/data/prepare.h"

namespace hwt {

struct TokenizerTrainOptions {
  int64_t vocab_size = 16000;      // pieces, end-of-text included
  std::string model_type = "bpe";  // bpe | unigram
  // Share of characters the model must cover (SentencePiece's default 0.9995 suits alphabets with
  // many rare characters); the rest become byte pieces when byte_fallback is on, else <unk>.
  double character_coverage = 0.9995;
  // Unknown characters as UTF-8 byte pieces, so every text round-trips; needs 256 of the pieces,
  // hence only with vocab_size >= 512 (turned off below that, with a warning).
  bool byte_fallback = true;
  // Sentences SentencePiece samples for training (it holds them in memory): 2 M pieces of up to
  // 4 KiB bound it to a few GB and saturate the statistics of a 16k vocabulary.
  int64_t max_sentences = 2000000;
  int64_t max_sentence_bytes = 4096;  // documents are fed in line-aligned pieces of at most this size
  int64_t num_threads = 0;            // 0 = one per core
  PrepareOptions read;  // inputs: format, jsonl_field, strict, include, exclude, document_separator

  // ConfigError naming the option.
  void validate() const;
};

struct TokenizerTrainStats {
  std::filesystem::path model;  // DIR/tokenizer.model
  std::string name;             // "spm:<hex>"
  int64_t vocab_size = 0;
  int64_t num_files = 0, num_bytes = 0, num_documents = 0, num_sentences = 0;
  int64_t num_bad_lines = 0;
  double seconds = 0;
};

// DataError for empty or bad inputs (as prepare), ConfigError when SentencePiece refuses the
// options (e.g. a vocabulary larger than the corpus supports), with its message.
TokenizerTrainStats train_tokenizer(const std::vector<std::filesystem::path>& inputs,
                                    const std::filesystem::path& output_dir, const TokenizerTrainOptions& options);

// "spm:ab12... (bpe, 16000 pieces) from 3 files, 120 MiB, 40,000 sentences in 12.3 s"
std::string describe(const TokenizerTrainStats& stats);

}  // namespace hwt
