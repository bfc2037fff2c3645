// prepare: text in (files, directories, JSONL, standard input), tokens out, either as one token
// file (.hwt, token_file.h) or as a sharded dataset: a directory of fixed-size token shards plus
// manifest.json (manifest.h) and the tokenizer's files. Documents are whole files, the pieces
// between separator lines, or JSONL records; each goes to train or validation by a seeded hash of
// its index; an end-of-text id separates consecutive documents.
// Streaming throughout: files are read in 1 MiB blocks, tokenized on all cores in order, and
// written as they come; memory stays bounded whatever the corpus size. Outputs appear atomically.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hwt {

namespace fs = std::filesystem;
struct DataConfig;

enum class InputFormat {
  kAuto,   // .jsonl and .ndjson files are JSONL, everything else (standard input too) text
  kText,
  kJsonl,  // one JSON object per line; its `jsonl_field` string is a document
};
// "auto" | "text" | "jsonl"; ConfigError naming `key` otherwise.
InputFormat parse_input_format(const std::string& name, const std::string& key = "--format");
const char* input_format_name(InputFormat format);

// Tokens per shard when none is given: 100 M (200 MB of uint16), FineWeb's shard size, large
// enough that a 10 B-token corpus is 100 files, small enough to verify one in a fraction of a second.
inline constexpr int64_t kDefaultShardTokens = 100000000;
// The most tokenizer threads prepare and tokenizer training start (--threads).
inline constexpr int64_t kMaxDataThreads = 1024;
// ConfigError naming --threads unless 0 (one per core) <= num_threads <= kMaxDataThreads.
void check_data_threads(int64_t num_threads);

struct PrepareOptions {
  std::string tokenizer = "byte";    // make_tokenizer() spec (data.tokenizer)
  double val_fraction = 0.05;        // probability that a document goes to validation, in (0, 1)
  int64_t split_seed = 1337;         // seed of that choice
  std::string document_separator;    // a line separating documents ("%" in fortune files); "" = whole files
  // Longer documents are cut into pieces of about this many bytes before the split, so that a
  // single large text file still yields a validation split; 0 = never cut. 64 KiB keeps the
  // pieces many (tiny-shakespeare: 17) while rarely cutting an ordinary document.
  int64_t max_document_bytes = 65536;
  InputFormat format = InputFormat::kAuto;
  std::string jsonl_field = "text";  // the JSONL field holding a document's text
  bool strict = false;               // a bad JSONL line is an error (else it is skipped and counted)
  std::vector<std::string> include, exclude;  // globs choosing files inside directories (corpus.h)
  int64_t shard_tokens = 0;          // tokens per shard; 0 = kDefaultShardTokens (directory outputs)
  int64_t num_threads = 0;           // tokenizer threads; 0 = one per core, at most kMaxDataThreads
  bool progress = true;              // a progress line on stderr, when it is a terminal

  static PrepareOptions from_config(const DataConfig& data);
  // ConfigError naming the data.* key (or option) for out-of-range values.
  void validate() const;
};

struct PrepareStats {
  fs::path output;
  bool sharded = false;
  uint64_t fingerprint = 0;
  int64_t num_files = 0;          // files read (text or JSONL)
  int64_t num_skipped_files = 0;  // hidden, .dat, duplicate links, special, binary
  int64_t num_filtered_files = 0; // left out by include/exclude
  int64_t num_bytes = 0;          // bytes read
  int64_t num_documents = 0;      // split units (documents and pieces of long ones)
  int64_t num_train_documents = 0;
  int64_t num_val_documents = 0;
  int64_t num_train_tokens = 0;
  int64_t num_val_tokens = 0;
  int64_t num_bad_lines = 0;      // JSONL lines skipped
  std::string first_bad_line;     // "file:line: why" of the first
  int64_t num_shards = 0;
  double seconds = 0;
};

// One token file at `output`. Errors are one-line DataErrors naming the path: a missing input, an
// unreadable file, a named file that is binary (NUL bytes; binary files inside directories are
// skipped), a directory with no text file, an empty corpus, a corpus too small to split into two
// non-empty splits, invalid UTF-8 for a SentencePiece tokenizer (file and byte offset), a bad JSONL
// line with `strict`. On any error `output` is left as it was.
PrepareStats prepare_token_file(const std::vector<fs::path>& inputs, const fs::path& output,
                                const PrepareOptions& options);

// A sharded dataset in directory `output` (created; a previous dataset there is replaced, any
// other non-empty directory refused): train-NNNNN.hwt and val-NNNNN.hwt shards of
// options.shard_tokens tokens, tokenizer.json (+ tokenizer.model), and manifest.json last.
// Errors as prepare_token_file; on error no manifest is left.
PrepareStats prepare_dataset(const std::vector<fs::path>& inputs, const fs::path& output,
                             const PrepareOptions& options);

// True when prepare() writes a sharded dataset: `output` does not end in .hwt, or shard_tokens > 0.
bool is_dataset_output(const fs::path& output, const PrepareOptions& options);
// prepare_dataset or prepare_token_file, by is_dataset_output.
PrepareStats prepare(const std::vector<fs::path>& inputs, const fs::path& output, const PrepareOptions& options);

// "3 files, 12,345 documents, 2.7 MiB -> 2,634,012 train + 139,101 val tokens in 0.05 s"
std::string describe(const PrepareStats& stats);

}  // namespace hwt
