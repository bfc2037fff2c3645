#include "hwtrain/data/sharded_dataset.h"

#include "hwtrain/core/error.h"
#include "hwtrain/data/tokenizer_files.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace fs = std::filesystem;

bool is_dataset_dir(const fs::path& path) {
  if (!has_manifest(path)) return false;
  if (is_prepared_dataset(path)) return true;
  // A damaged manifest beside prepare's shards is still a dataset (read_manifest says what is
  // wrong); a text corpus's own manifest.json (a web project's) is not.
  std::error_code ec;
  int seen = 0;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end && seen < 100000; it.increment(ec), ++seen) {
    const std::string name = it->path().filename().string();
    if (name.rfind("train-", 0) == 0 && it->path().extension() == ".hwt") return true;
  }
  return false;
}

ShardedDataset::ShardedDataset(const fs::path& path, DatasetOpenOptions options) : path_(path) {
  std::error_code ec;
  if (path.filename() == kManifestFile && fs::is_regular_file(path, ec)) {
    path_ = path.parent_path();
    open_directory(path_, options);
  } else if (fs::is_directory(path, ec)) {
    if (!has_manifest(path)) {
      throw DataError("dataset directory " + path.string() + " has no " + kManifestFile +
                      " (an interrupted hwtrain prepare writes none); re-run hwtrain prepare");
    }
    open_directory(path, options);
  } else {
    open_file(path, options);
  }
}

void ShardedDataset::open_file(const fs::path& file, const DatasetOpenOptions& options) {
  auto f = std::make_shared<const TokenFile>(file, options.verify_checksums);
  vocab_size_ = f->vocab_size();
  dtype_ = f->dtype();
  tokenizer_name_ = f->tokenizer_name();
  fingerprint_ = f->fingerprint();
  num_documents_[0] = f->num_train_documents();
  num_documents_[1] = f->num_val_documents();
  train_ = TokenSequence(f->train());
  val_ = TokenSequence(f->val());
  files_.push_back(std::move(f));
}

void ShardedDataset::open_directory(const fs::path& dir, const DatasetOpenOptions& options) {
  DatasetManifest m = read_manifest(dir);
  const fs::path manifest_file = dir / kManifestFile;
  vocab_size_ = m.vocab_size;
  dtype_ = m.dtype;
  tokenizer_name_ = m.tokenizer_name;
  fingerprint_ = m.fingerprint;
  std::vector<TokenSpan> pieces[2];
  for (const ShardRecord& r : m.shards) {
    const fs::path file = dir / r.file;
    std::error_code ec;
    if (!fs::exists(file, ec)) {
      throw DataError("manifest " + manifest_file.string() + " lists shard " + r.file + ", which is missing (" +
                      file.string() + "); restore it or re-run hwtrain prepare");
    }
    auto f = std::make_shared<const TokenFile>(file, /*verify_checksum=*/false);
    const TokenFileHeader& h = f->header();
    auto mismatch = [&](const std::string& what, const std::string& in_file, const std::string& in_manifest) {
      throw DataError("shard " + file.string() + " does not belong to " + manifest_file.string() + ": its " + what +
                      " is " + in_file + ", the manifest says " + in_manifest + "; re-run hwtrain prepare");
    };
    if (h.shard_index != r.index || h.num_shards != m.shards.size()) {
      mismatch("shard number", std::to_string(h.shard_index) + " of " + std::to_string(h.num_shards),
               std::to_string(r.index) + " of " + std::to_string(m.shards.size()));
    }
    if (h.fingerprint != m.fingerprint) mismatch("fingerprint", std::to_string(h.fingerprint), std::to_string(m.fingerprint));
    if (h.tokenizer_name != m.tokenizer_name) mismatch("tokenizer", h.tokenizer_name, m.tokenizer_name);
    if (static_cast<int64_t>(h.vocab_size) != m.vocab_size || h.dtype != m.dtype) {
      mismatch("vocabulary", std::to_string(h.vocab_size) + " " + dtype_name(h.dtype),
               std::to_string(m.vocab_size) + " " + dtype_name(m.dtype));
    }
    const bool train = r.split == Split::kTrain;
    const int64_t in_split = train ? h.num_train_tokens : h.num_val_tokens;
    const int64_t other = train ? h.num_val_tokens : h.num_train_tokens;
    if (in_split != r.num_tokens || other != 0) {
      mismatch(std::string(split_name(r.split)) + " token count", std::to_string(in_split) + " (+" + std::to_string(other) + ")",
               std::to_string(r.num_tokens));
    }
    if (h.payload_crc32c != r.crc32c) mismatch("payload CRC32C", std::to_string(h.payload_crc32c), std::to_string(r.crc32c));
    if (options.verify_checksums) f->verify_checksum(&r.block_crc32c);
    pieces[train ? 0 : 1].push_back(f->split(r.split));
    num_documents_[train ? 0 : 1] += r.num_documents;
    files_.push_back(std::move(f));
  }
  train_ = TokenSequence(std::move(pieces[0]));
  val_ = TokenSequence(std::move(pieces[1]));
  manifest_ = std::move(m);
}

std::unique_ptr<Tokenizer> dataset_tokenizer(const ShardedDataset& ds, const std::string& spec) {
  std::unique_ptr<Tokenizer> tok;
  if (ds.is_sharded()) {
    tok = load_tokenizer(ds.path());
    if (tok->name() != ds.tokenizer_name()) {
      throw DataError("dataset " + ds.path().string() + " was prepared with tokenizer '" + ds.tokenizer_name() +
                      "' but its tokenizer files hold '" + tok->name() + "'; re-run hwtrain prepare");
    }
    if (spec == "byte" && tok->name() != "byte") {
      log_info("data: dataset {} brings its own tokenizer {} (data.tokenizer = 'byte' is the default; it defers)",
               ds.path().string(), tok->name());
      return tok;
    }
  }
  std::unique_ptr<Tokenizer> wanted = make_tokenizer(spec);
  if (wanted->name() != ds.tokenizer_name()) {
    throw DataError("dataset " + ds.path().string() + " was prepared with tokenizer '" + ds.tokenizer_name() +
                    "' but data.tokenizer = '" + spec + "' is '" + wanted->name() +
                    "'; set data.tokenizer to the dataset's tokenizer or re-run hwtrain prepare with this one");
  }
  if (wanted->vocab_size() != ds.vocab_size()) {
    throw DataError("dataset " + ds.path().string() + " has a vocabulary of " + std::to_string(ds.vocab_size()) +
                    " but tokenizer '" + wanted->name() + "' has " + std::to_string(wanted->vocab_size()));
  }
  return tok ? std::move(tok) : std::move(wanted);
}

void copy_tokenizer_files(const ShardedDataset& dataset, const std::string& spec, const fs::path& dir) {
  save_tokenizer(*dataset_tokenizer(dataset, spec), dir);
}

}  // namespace hwt
