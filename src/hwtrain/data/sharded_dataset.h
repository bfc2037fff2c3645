// ShardedDataset: a prepared dataset opened for training, either a sharded dataset directory
// (manifest.json + shards, prepare.h) or a single token file (.hwt). Every shard is memory-mapped
// and validated before use: a shard the manifest lists but that is missing, truncated, from
// another dataset, or whose checksum fails is a DataError naming the file (and the byte range for
// checksums). A split is one TokenSequence across its shards, so samplers see one run of tokens.
// Also: the tokenizer that goes with a dataset, and copying it next to a checkpoint.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/data/manifest.h"
#include "hwtrain/data/token_file.h"
#include "hwtrain/data/token_sequence.h"
#include "hwtrain/data/tokenizer.h"

namespace hwt {

struct DatasetOpenOptions {
  // Read every payload once to check its CRC32C (about 10 GB/s from the page cache); off only for
  // tools that merely inspect headers.
  bool verify_checksums = true;
};

// True when `path` is a directory that hwtrain prepare wrote: its manifest.json says so, or (when
// the manifest is damaged) train-*.hwt shards lie beside it.
bool is_dataset_dir(const std::filesystem::path& path);

class ShardedDataset {
 public:
  // A dataset directory (or its manifest.json), or a token file.
  explicit ShardedDataset(const std::filesystem::path& path, DatasetOpenOptions options = {});

  const std::filesystem::path& path() const { return path_; }
  bool is_sharded() const { return manifest_.has_value(); }
  const DatasetManifest* manifest() const { return manifest_ ? &*manifest_ : nullptr; }
  size_t num_shards() const { return files_.size(); }
  const TokenFile& shard(size_t i) const { return *files_[i]; }

  TokenSequence split(Split s) const { return s == Split::kTrain ? train_ : val_; }
  TokenSequence train() const { return train_; }
  TokenSequence val() const { return val_; }

  int64_t vocab_size() const { return vocab_size_; }
  TokenDtype dtype() const { return dtype_; }
  const std::string& tokenizer_name() const { return tokenizer_name_; }
  uint64_t fingerprint() const { return fingerprint_; }
  int64_t num_train_tokens() const { return train_.size(); }
  int64_t num_val_tokens() const { return val_.size(); }
  int64_t num_train_documents() const { return num_documents_[0]; }
  int64_t num_val_documents() const { return num_documents_[1]; }

 private:
  void open_directory(const std::filesystem::path& dir, const DatasetOpenOptions& options);
  void open_file(const std::filesystem::path& file, const DatasetOpenOptions& options);

  std::filesystem::path path_;
  std::optional<DatasetManifest> manifest_;
  std::vector<std::shared_ptr<const TokenFile>> files_;
  TokenSequence train_, val_;
  int64_t vocab_size_ = 0;
  TokenDtype dtype_ = TokenDtype::kUInt16;
  std::string tokenizer_name_;
  uint64_t fingerprint_ = 0;
  int64_t num_documents_[2] = {0, 0};
};

// The tokenizer of `dataset`. A dataset directory carries its own (tokenizer.json/.model); a token
// file only names it, and `spec` (data.tokenizer) provides it. DataError when `spec` names a
// tokenizer other than the dataset's, except that the default spec "byte" defers to a dataset
// directory's own tokenizer (said in the log).
std::unique_ptr<Tokenizer> dataset_tokenizer(const ShardedDataset& dataset, const std::string& spec);

// Writes the dataset's tokenizer (tokenizer.json, + tokenizer.model for SentencePiece) into `dir`,
// e.g. a checkpoint's staging directory, so a checkpoint always carries the tokenizer it was
// trained with. `spec` as for dataset_tokenizer.
void copy_tokenizer_files(const ShardedDataset& dataset, const std::string& spec, const std::filesystem::path& dir);

}  // namespace hwt
