#include "hwtrain/data/manifest.h"

#include <cinttypes>
#include <cstdio>
#include <type_traits>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/core/json_integer.h"
#include "hwtrain/core/strings.h"

namespace hwt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A manifest lists a few hundred bytes per 4 MiB block of tokens: 256 MiB covers petabytes.
constexpr uint64_t kMaxManifestBytes = 256u << 20;

[[noreturn]] void bad_manifest(const fs::path& file, const std::string& what) {
  throw DataError("manifest " + file.string() + ": " + what + "; re-run hwtrain prepare");
}

template <class T>
struct IsVector : std::false_type {};
template <class E>
struct IsVector<std::vector<E>> : std::true_type {};

template <class T>
T field(const json& j, const char* key, const fs::path& file) {
  auto it = j.find(key);
  if (it == j.end()) bad_manifest(file, std::string("missing field '") + key + "'");
  auto wrong = [&] {
    bad_manifest(file, std::string("field '") + key + "' has the wrong type or range (" + it->type_name() + ")");
  };
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!json_integer_fits<T>(*it)) wrong();
  } else if constexpr (IsVector<T>::value) {
    if constexpr (std::is_integral_v<typename T::value_type>) {
      if (!it->is_array()) wrong();
      for (const json& e : *it) {
        if (!json_integer_fits<typename T::value_type>(e)) wrong();
      }
    }
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    wrong();
  }
  return T{};  // not reached: wrong() throws
}

// An optional field: `fallback` when absent, else checked as field() checks it. (nlohmann's
// value() throws its own type_error, naming neither file nor key: found by fuzz/dataset_manifest.)
template <class T>
T optional_field(const json& j, const char* key, T fallback, const fs::path& file) {
  return j.contains(key) ? field<T>(j, key, file) : fallback;
}

}  // namespace

json DatasetManifest::to_json() const {
  json shard_list = json::array();
  for (const ShardRecord& s : shards) {
    shard_list.push_back({{"file", s.file},
                          {"split", s.split == Split::kTrain ? "train" : "val"},
                          {"index", s.index},
                          {"tokens", s.num_tokens},
                          {"documents", s.num_documents},
                          {"bytes", s.bytes},
                          {"crc32c", s.crc32c},
                          {"block_crc32c", s.block_crc32c}});
  }
  return {{"format", "hwtrain-dataset"},
          {"version", version},
          {"created_by", created_by},
          {"fingerprint", hex64(fingerprint)},
          {"tokenizer", tokenizer},
          {"tokenizer_name", tokenizer_name},
          {"vocab_size", vocab_size},
          {"dtype", dtype_name(dtype)},
          {"shard_tokens", shard_tokens},
          {"checksum_block_bytes", kChecksumBlockBytes},
          {"split",
           {{"val_fraction", val_fraction},
            {"seed", split_seed},
            {"train_tokens", num_train_tokens},
            {"val_tokens", num_val_tokens},
            {"train_documents", num_train_documents},
            {"val_documents", num_val_documents}}},
          {"shards", shard_list},
          {"sources", sources},
          {"options", options}};
}

DatasetManifest DatasetManifest::from_json(const json& j, const fs::path& file) {
  if (!j.is_object() || optional_field<std::string>(j, "format", "", file) != "hwtrain-dataset") {
    bad_manifest(file, "not an hwtrain dataset manifest");
  }
  DatasetManifest m;
  m.version = field<int64_t>(j, "version", file);
  if (m.version != kManifestVersion) {
    throw DataError("manifest " + file.string() + " has version " + std::to_string(m.version) +
                    "; this hwtrain reads version " + std::to_string(kManifestVersion) + "; re-run hwtrain prepare");
  }
  m.created_by = optional_field<std::string>(j, "created_by", "", file);
  std::string fp = field<std::string>(j, "fingerprint", file);
  try {
    m.fingerprint = std::stoull(fp, nullptr, 16);
  } catch (const std::exception&) {
    bad_manifest(file, "fingerprint '" + fp + "' is not hexadecimal");
  }
  m.tokenizer = field<json>(j, "tokenizer", file);
  m.tokenizer_name = field<std::string>(j, "tokenizer_name", file);
  m.vocab_size = field<int64_t>(j, "vocab_size", file);
  std::string dtype = field<std::string>(j, "dtype", file);
  if (dtype == "uint16") {
    m.dtype = TokenDtype::kUInt16;
  } else if (dtype == "uint32") {
    m.dtype = TokenDtype::kUInt32;
  } else {
    bad_manifest(file, "dtype '" + dtype + "'; valid: uint16, uint32");
  }
  if (m.vocab_size < 1 || m.vocab_size > (int64_t{1} << 32)) bad_manifest(file, "vocab_size " + std::to_string(m.vocab_size));
  if (m.dtype == TokenDtype::kUInt16 && m.vocab_size > 65536) {
    bad_manifest(file, "a vocabulary of " + std::to_string(m.vocab_size) + " does not fit its uint16 tokens (at most 65536)");
  }
  if (field<uint64_t>(j, "checksum_block_bytes", file) != kChecksumBlockBytes) {
    bad_manifest(file, "checksum_block_bytes is not " + std::to_string(kChecksumBlockBytes));
  }
  m.shard_tokens = optional_field<int64_t>(j, "shard_tokens", 0, file);
  json split = field<json>(j, "split", file);
  m.val_fraction = field<double>(split, "val_fraction", file);
  m.split_seed = field<int64_t>(split, "seed", file);
  m.num_train_tokens = field<int64_t>(split, "train_tokens", file);
  m.num_val_tokens = field<int64_t>(split, "val_tokens", file);
  m.num_train_documents = field<int64_t>(split, "train_documents", file);
  m.num_val_documents = field<int64_t>(split, "val_documents", file);
  json shard_list = field<json>(j, "shards", file);
  if (!shard_list.is_array() || shard_list.empty()) bad_manifest(file, "no shards listed");
  int64_t tokens[2] = {0, 0};
  bool seen_val = false;
  for (const json& s : shard_list) {
    ShardRecord r;
    r.file = field<std::string>(s, "file", file);
    if (!is_path_inside_dir(r.file) || r.file.find('/') != std::string::npos) {  // shards sit directly in the dataset dir
      bad_manifest(file, "shard file name '" + r.file + "' is not a plain file name in the dataset directory");
    }
    std::string sp = field<std::string>(s, "split", file);
    if (sp != "train" && sp != "val") bad_manifest(file, "shard " + r.file + " has split '" + sp + "'; valid: train, val");
    r.split = sp == "train" ? Split::kTrain : Split::kVal;
    if (r.split == Split::kTrain && seen_val) bad_manifest(file, "train shard " + r.file + " listed after validation shards");
    seen_val = seen_val || r.split == Split::kVal;
    r.index = field<uint32_t>(s, "index", file);
    if (r.index != m.shards.size()) bad_manifest(file, "shard " + r.file + " has index " + std::to_string(r.index) + " at position " + std::to_string(m.shards.size()));
    r.num_tokens = field<int64_t>(s, "tokens", file);
    r.num_documents = field<int64_t>(s, "documents", file);
    r.bytes = field<uint64_t>(s, "bytes", file);
    r.crc32c = field<uint32_t>(s, "crc32c", file);
    r.block_crc32c = field<std::vector<uint32_t>>(s, "block_crc32c", file);
    if (r.num_tokens < 1) bad_manifest(file, "shard " + r.file + " has " + std::to_string(r.num_tokens) + " tokens");
    tokens[r.split == Split::kTrain ? 0 : 1] += r.num_tokens;
    m.shards.push_back(std::move(r));
  }
  if (tokens[0] != m.num_train_tokens || tokens[1] != m.num_val_tokens) {
    bad_manifest(file, "shards hold " + std::to_string(tokens[0]) + " train + " + std::to_string(tokens[1]) +
                  " validation tokens, the split says " + std::to_string(m.num_train_tokens) + " + " +
                  std::to_string(m.num_val_tokens));
  }
  m.sources = optional_field<json>(j, "sources", json::array(), file);
  m.options = optional_field<json>(j, "options", json::object(), file);
  if (!m.sources.is_array() || !m.options.is_object()) bad_manifest(file, "'sources' must be a list and 'options' an object");
  return m;
}

bool has_manifest(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_regular_file(dir / kManifestFile, ec);
}

bool is_prepared_dataset(const fs::path& dir) {
  if (!has_manifest(dir)) return false;
  try {
    const auto j = parse_json_bounded(read_regular_file(dir / kManifestFile, 64u << 20));
    return j.is_object() && j.value("format", std::string()) == "hwtrain-dataset";
  } catch (const std::exception&) {
    return false;
  }
}

void write_manifest(const fs::path& dir, const DatasetManifest& manifest) {
  write_file_atomic(dir / kManifestFile, manifest.to_json().dump(1) + "\n");
}

DatasetManifest read_manifest(const fs::path& dir) {
  const fs::path file = dir / kManifestFile;
  std::string text;
  try {
    text = read_regular_file(file, kMaxManifestBytes);
  } catch (const IoError& e) {
    throw DataError(std::string(e.what()) + "; a dataset directory needs the manifest.json hwtrain prepare writes last");
  }
  const json j = parse_json_bounded_or_discarded(text);
  if (j.is_discarded()) bad_manifest(file, "not valid JSON (" + std::to_string(text.size()) + " bytes)");
  return DatasetManifest::from_json(j, file);
}

}  // namespace hwt
