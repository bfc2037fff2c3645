// The manifest of a sharded dataset: manifest.json in the dataset directory, written last and
// atomically by prepare, so a directory without one is not a dataset (an interrupted prepare).
// It lists the shards in order (file, split, token and document counts, CRC32C of the payload and
// of each 4 MiB block), the tokenizer, the vocabulary size and token dtype, the split options and
// the sources. No validation of the shards themselves here (see sharded_dataset.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hwtrain/data/shard_writer.h"
#include "hwtrain/data/token_file.h"

namespace hwt {

inline const char* const kManifestFile = "manifest.json";
inline constexpr int64_t kManifestVersion = 1;

struct DatasetManifest {
  int64_t version = kManifestVersion;
  uint64_t fingerprint = 0;
  std::string tokenizer_name;
  nlohmann::json tokenizer = nlohmann::json::object();  // describe_tokenizer()
  int64_t vocab_size = 0;
  TokenDtype dtype = TokenDtype::kUInt16;
  double val_fraction = 0;
  int64_t split_seed = 0;
  int64_t shard_tokens = 0;
  int64_t num_train_tokens = 0, num_val_tokens = 0, num_train_documents = 0, num_val_documents = 0;
  std::vector<ShardRecord> shards;                     // train shards, then validation shards
  nlohmann::json sources = nlohmann::json::array();    // [{path, bytes, mtime_ns}] or {path: "-", bytes}
  nlohmann::json options = nlohmann::json::object();   // the prepare options that shaped the data
  std::string created_by;                               // "hwtrain 0.1.0"

  nlohmann::json to_json() const;
  // DataError naming `file` for a missing or ill-typed field, an unknown version, shards out of
  // order, or a vocabulary that does not fit the dtype.
  static DatasetManifest from_json(const nlohmann::json& j, const std::filesystem::path& file);
};

// True when `dir` is a directory with a manifest.json.
bool has_manifest(const std::filesystem::path& dir);
// Whether dir/manifest.json is one that hwtrain prepare wrote ("format": "hwtrain-dataset"), read
// with a size bound; a text corpus may hold a manifest.json of its own.
bool is_prepared_dataset(const std::filesystem::path& dir);
// Writes dir/manifest.json atomically.
void write_manifest(const std::filesystem::path& dir, const DatasetManifest& manifest);
// Reads and checks dir/manifest.json; DataError naming it.
DatasetManifest read_manifest(const std::filesystem::path& dir);

}  // namespace hwt
