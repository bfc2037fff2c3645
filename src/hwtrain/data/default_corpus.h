// resolve_dataset(): turns data.path into the token file training reads. The default corpus (empty
// data.path) is the text of Debian's fortunes package; text files and directories are prepared
// once into a cache named by their fingerprint and reused until the source or a split option
// changes; a prepared token file is used as it is. Says what it does through log_info.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "hwtrain/data/data_config.h"

namespace hwt {

namespace fs = std::filesystem;

// Where Debian's fortunes package installs its text files (with .dat indexes and .u8 links,
// which prepare skips); documents in them are separated by lines "%".
inline const char* const kDefaultCorpusDir = "/usr/share/games/fortunes";
inline const char* const kDefaultCorpusSeparator = "%";

// data.cache_dir, else $XDG_CACHE_HOME/hwtrain/data, else ~/.cache/hwtrain/data.
fs::path data_cache_dir(const DataConfig& cfg);

// "<name>-<16 hex digits>.hwt" in the cache directory.
fs::path cached_token_file(const fs::path& cache_dir, const std::string& name, uint64_t fingerprint);

// The dataset for `cfg` (a path ShardedDataset opens):
//   - data.path empty: the default corpus, prepared into <cache>/fortunes-<fingerprint>.hwt with
//     separator "%" (unless data.document_separator says otherwise); DataError with the install
//     hint when the fortunes package is missing.
//   - a dataset directory (manifest.json): the directory, after its tokenizer is compared with
//     data.tokenizer (the default 'byte' defers to the dataset's own tokenizer).
//   - a token file (.hwt, or a file starting with the token file magic): the path itself, after
//     its header is checked and its tokenizer compared with data.tokenizer.
//   - a text file or directory: prepared into <cache>/<name>-<fingerprint>.hwt.
// A cached file is reused when its name (the fingerprint) matches and it opens cleanly (checksum
// included); a corrupt one is rebuilt with a warning.
fs::path resolve_dataset(const DataConfig& cfg);
// The same, looking for the default corpus in `default_corpus_dir` (tests).
fs::path resolve_dataset(const DataConfig& cfg, const fs::path& default_corpus_dir);

// The vocabulary size the data of `cfg` will have, without preparing anything: a dataset
// directory's manifest, a token file's header, else data.tokenizer's (for `hwtrain plan`/`info`).
int64_t data_vocab_size(const DataConfig& cfg);

}  // namespace hwt
