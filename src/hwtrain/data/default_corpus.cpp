#include "hwtrain/data/default_corpus.h"

#include <pwd.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdlib>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/manifest.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/token_file.h"
#include "hwtrain/data/tokenizer.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace {

// A file-name-safe version of the corpus name.
std::string cache_name(const fs::path& input) {
  fs::path p = fs::absolute(input).lexically_normal();
  std::string name = p.filename().string();
  if (name.empty()) name = p.parent_path().filename().string();
  std::string out;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.';
    out.push_back(ok ? c : '_');
  }
  while (!out.empty() && out[0] == '.') out.erase(0, 1);  // never a hidden cache file
  return out.empty() ? "corpus" : out;
}

bool is_token_file(const fs::path& p) {
  return p.extension() == ".hwt" || has_token_file_magic(p);
}

// Prepares `inputs` into the cache under `name`, or reuses the cached file.
fs::path prepare_cached(const std::vector<fs::path>& inputs, const std::string& name, const PrepareOptions& opts,
                        const DataConfig& cfg) {
  opts.validate();
  std::string tokenizer_name = make_tokenizer(opts.tokenizer)->name();
  uint64_t fingerprint = corpus_fingerprint(list_corpus_files(inputs), opts, tokenizer_name);
  fs::path target = cached_token_file(data_cache_dir(cfg), name, fingerprint);
  std::error_code ec;
  if (fs::exists(target, ec)) {
    try {
      TokenFile file(target);
      if (file.fingerprint() == fingerprint) {
        log_info("data: using cached {} ({} train + {} val tokens)", target.string(), file.num_train_tokens(),
                 file.num_val_tokens());
        return target;
      }
      log_warn("data: cached {} has fingerprint {}, expected {}; rebuilding", target.string(),
               hex64(file.fingerprint()), hex64(fingerprint));
    } catch (const DataError& e) {
      log_warn("data: cached {} is unusable ({}); rebuilding", target.string(), e.what());
    }
  }
  log_info("data: preparing {} -> {}", inputs.front().string(), target.string());
  PrepareStats stats = prepare_token_file(inputs, target, opts);
  log_info("data: {}", describe(stats));
  return target;
}

// data.path, where a dataset's manifest.json names its directory (not a text file to train on).
fs::path dataset_path(const std::string& path) {
  const fs::path p(path);
  if (p.filename() == kManifestFile && is_prepared_dataset(p.parent_path().empty() ? "." : p.parent_path())) {
    return p.parent_path().empty() ? fs::path(".") : p.parent_path();
  }
  return p;
}

}  // namespace

fs::path data_cache_dir(const DataConfig& cfg) {
  if (!cfg.cache_dir.empty()) return fs::path(cfg.cache_dir);
  if (const char* cache = std::getenv("HWTRAIN_CACHE"); cache != nullptr && cache[0] != '\0') {
    return fs::path(cache) / "data";  // where the GEMM probe and LibTorch's environment are kept
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return fs::path(xdg) / "hwtrain" / "data";
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] == '\0') {
    const passwd* pw = ::getpwuid(::getuid());
    home = pw != nullptr ? pw->pw_dir : nullptr;
  }
  if (home == nullptr) return fs::temp_directory_path() / "hwtrain-cache" / "data";
  return fs::path(home) / ".cache" / "hwtrain" / "data";
}

fs::path cached_token_file(const fs::path& cache_dir, const std::string& name, uint64_t fingerprint) {
  return cache_dir / (name + "-" + hex64(fingerprint) + ".hwt");
}

fs::path resolve_dataset(const DataConfig& cfg) { return resolve_dataset(cfg, kDefaultCorpusDir); }

fs::path resolve_dataset(const DataConfig& cfg, const fs::path& default_corpus_dir) {
  PrepareOptions opts = PrepareOptions::from_config(cfg);
  if (cfg.path.empty()) {
    std::error_code ec;
    if (!fs::is_directory(default_corpus_dir, ec)) {
      throw DataError("default corpus " + default_corpus_dir.string() +
                      " not found: install Debian's fortunes package (sudo apt-get install fortunes), "
                      "or give a corpus with --data PATH");
    }
    if (opts.document_separator.empty()) opts.document_separator = kDefaultCorpusSeparator;
    log_info("data: default corpus {} (fortunes, documents separated by '{}')", default_corpus_dir.string(),
             opts.document_separator);
    return prepare_cached({default_corpus_dir}, "fortunes", opts, cfg);
  }
  const fs::path path = dataset_path(cfg.path);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw DataError("data.path = '" + cfg.path + "' does not exist; give a text file, a directory or a .hwt token file");
  }
  if (is_dataset_dir(path)) {
    DatasetManifest m = read_manifest(path);
    if (cfg.tokenizer != "byte" || m.tokenizer_name == "byte") {
      std::string wanted = make_tokenizer(cfg.tokenizer)->name();
      if (m.tokenizer_name != wanted) {
        throw DataError("dataset " + path.string() + " was prepared with tokenizer '" + m.tokenizer_name +
                        "' but data.tokenizer = '" + cfg.tokenizer + "' is '" + wanted +
                        "'; set data.tokenizer to match (or leave it 'byte': a dataset directory brings its own) "
                        "or re-run hwtrain prepare");
      }
    }
    log_info("data: dataset {} ({} shards, {} train + {} val tokens, tokenizer {})", path.string(), m.shards.size(),
             m.num_train_tokens, m.num_val_tokens, m.tokenizer_name);
    return path;
  }
  if (fs::is_regular_file(path, ec) && is_token_file(path)) {
    TokenFileHeader h = read_token_file_header(path);
    std::string wanted = make_tokenizer(cfg.tokenizer)->name();
    if (h.tokenizer_name != wanted) {
      throw DataError("token file " + path.string() + " was prepared with tokenizer '" + h.tokenizer_name +
                      "' but data.tokenizer = '" + cfg.tokenizer + "'; set data.tokenizer to match or re-run "
                      "hwtrain prepare");
    }
    log_info("data: token file {} ({} train + {} val tokens, tokenizer {})", path.string(), h.num_train_tokens,
             h.num_val_tokens, h.tokenizer_name);
    return path;
  }
  return prepare_cached({path}, cache_name(path), opts, cfg);
}

int64_t data_vocab_size(const DataConfig& cfg) {
  const fs::path path = dataset_path(cfg.path);
  std::error_code ec;
  if (!cfg.path.empty() && is_dataset_dir(path)) return read_manifest(path).vocab_size;
  if (!cfg.path.empty() && fs::is_regular_file(path, ec) && is_token_file(path)) {
    return read_token_file_header(path).vocab_size;
  }
  return make_tokenizer(cfg.tokenizer)->vocab_size();
}

}  // namespace hwt
