#include "hwtrain/data/prepare_output.h"

#include <fnmatch.h>

#include <algorithm>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/manifest.h"
#include "hwtrain/data/tokenizer_files.h"

namespace hwt {

namespace fs = std::filesystem;

namespace {

bool is_shard_name(const std::string& name) {
  return ::fnmatch("train-*.hwt", name.c_str(), FNM_PERIOD) == 0 || ::fnmatch("val-*.hwt", name.c_str(), FNM_PERIOD) == 0;
}
// Temporary siblings (core/files.h: ".<name>.tmp-<pid>-<n>") of a prepare that was killed.
bool is_temporary_name(const std::string& name) { return !name.empty() && name[0] == '.' && name.find(".tmp-") != std::string::npos; }

}  // namespace

PreparedOutputDir::PreparedOutputDir(const fs::path& dir) : dir_(dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw ConfigError("--output " + dir.string() + " exists and is not a directory; a sharded dataset is a directory "
                      "(give a .hwt name without --shard-tokens for a single token file)");
  }
  if (fs::is_directory(dir, ec)) {
    std::vector<fs::path> temporaries;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (is_shard_name(name)) {
        old_shards_.push_back(name);
      } else if (is_temporary_name(name)) {
        temporaries.push_back(e.path());
      } else if (name != kManifestFile && name != kTokenizerJsonFile && name != kTokenizerModelFile) {
        throw ConfigError("--output " + dir.string() + " is a non-empty directory that holds no hwtrain dataset (it has '" +
                          name + "'); give a new or empty directory");
      }
    }
    if (ec) throw IoError("cannot list " + dir.string() + ": " + ec.message());
    for (const char* name : {kManifestFile, kTokenizerJsonFile, kTokenizerModelFile}) fs::remove(dir / name, ec);
    for (const fs::path& p : temporaries) fs::remove(p, ec);
  }
  ensure_writable_dir(dir);
}

void PreparedOutputDir::remove_stale(const std::vector<std::string>& kept) {
  for (const std::string& name : old_shards_) {
    if (std::find(kept.begin(), kept.end(), name) == kept.end()) {
      std::error_code ec;
      fs::remove(dir_ / name, ec);
    }
  }
}

}  // namespace hwt
