// prepare_token_file(): text files and directories in, one token file (.hwt, token_file.h) out.
// Documents are whole files or the pieces between separator lines; each goes to train or
// validation by a seeded hash of its index; an end-of-text id separates consecutive documents.
// Streaming: train tokens go straight to the output, only the validation text is held in memory.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hwt {

namespace fs = std::filesystem;
struct DataConfig;

struct PrepareOptions {
  std::string tokenizer = "byte";    // make_tokenizer() spec (data.tokenizer)
  double val_fraction = 0.05;        // probability that a document goes to validation, in (0, 1)
  int64_t split_seed = 1337;         // seed of that choice
  std::string document_separator;    // a line separating documents ("%" in fortune files); "" = whole files
  // Longer documents are cut into pieces of about this many bytes before the split, so that a
  // single large text file still yields a validation split; 0 = never cut. 64 KiB keeps the
  // pieces many (tiny-shakespeare: 17) while rarely cutting an ordinary document.
  int64_t max_document_bytes = 65536;

  static PrepareOptions from_config(const DataConfig& data);
  // ConfigError naming the data.* key for out-of-range values.
  void validate() const;
};

struct PrepareStats {
  fs::path output;
  uint64_t fingerprint = 0;
  int64_t num_files = 0;          // text files read
  int64_t num_skipped_files = 0;  // hidden, .dat, duplicate links, special, binary
  int64_t num_bytes = 0;          // bytes of text read
  int64_t num_documents = 0;      // split units (documents and pieces of long ones)
  int64_t num_train_documents = 0;
  int64_t num_val_documents = 0;
  int64_t num_train_tokens = 0;
  int64_t num_val_tokens = 0;
  double seconds = 0;
};

// Tokenizes `inputs` (files and directories, see list_corpus_files) into `output`, atomically.
// Errors are one-line DataErrors naming the path: a missing input, an unreadable file, a named
// file that is binary (contains NUL bytes; binary files inside directories are skipped), a
// directory with no text file, an empty corpus, a corpus too small to split into two non-empty
// splits. On any error `output` is left as it was.
PrepareStats prepare_token_file(const std::vector<fs::path>& inputs, const fs::path& output,
                                const PrepareOptions& options);

// "3 files, 12,345 documents, 2.7 MiB -> 2,634,012 train + 139,101 val tokens in 0.05 s"
std::string describe(const PrepareStats& stats);

}  // namespace hwt
