#include "hwtrain/data/prepare_output.h"

#include <fnmatch.h>
#include <unistd.h>

#include "hwtrain/core/error.h"
#include "hwtrain/core/fault_injection.h"
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

// Refuses a directory that holds anything but a dataset (or a killed prepare's temporaries).
void check_is_dataset_dir(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_shard_name(name) || is_temporary_name(name)) continue;
    if (name != kManifestFile && name != kTokenizerJsonFile && name != kTokenizerModelFile) {
      throw ConfigError("--output " + dir.string() + " is a non-empty directory that holds no hwtrain dataset (it has '" +
                        name + "'); give a new or empty directory");
    }
  }
  if (ec) throw IoError("cannot list " + dir.string() + ": " + ec.message());
}

// A killed prepare's leftovers beside `dir`: staging directories are removed; a dataset set
// aside by a prepare that died between its two renames is put back when `dir` is missing.
void recover_leftovers(const fs::path& dir) {
  const std::string staging_prefix = "." + dir.filename().string() + ".staging-";
  const std::string aside_prefix = "." + dir.filename().string() + ".old-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(staging_prefix, 0) == 0) {
      fs::remove_all(e.path(), ec);
    } else if (name.rfind(aside_prefix, 0) == 0) {
      if (!fs::exists(dir)) {
        rename_durable(e.path(), dir);
      } else {
        fs::remove_all(e.path(), ec);
      }
    }
  }
}

}  // namespace

PreparedOutputDir::PreparedOutputDir(const fs::path& output) {
  dir_ = fs::absolute(output).lexically_normal();
  if (!dir_.has_filename()) dir_ = dir_.parent_path();  // "data/" is "data"
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec)) {
    throw ConfigError("--output " + output.string() + " exists and is not a directory; a sharded dataset is a directory "
                      "(give a .hwt name without --shard-tokens for a single token file)");
  }
  ensure_writable_dir(dir_.parent_path());
  recover_leftovers(dir_);
  if (fs::is_directory(dir_, ec)) check_is_dataset_dir(dir_);
  const std::string pid = std::to_string(::getpid());
  staging_ = dir_.parent_path() / ("." + dir_.filename().string() + ".staging-" + pid);
  aside_ = dir_.parent_path() / ("." + dir_.filename().string() + ".old-" + pid);
  fs::create_directory(staging_, ec);
  if (ec) throw IoError("cannot create " + staging_.string() + ": " + ec.message());
}

PreparedOutputDir::~PreparedOutputDir() {
  std::error_code ignored;
  if (!committed_) fs::remove_all(staging_, ignored);
}

void PreparedOutputDir::commit() {
  fsync_path(staging_);
  fault_point("prepare");  // the new dataset complete in staging, the old one untouched
  std::error_code ec;
  const bool replacing = fs::exists(dir_, ec);
  if (replacing) rename_durable(dir_, aside_);
  rename_durable(staging_, dir_);
  committed_ = true;
  if (replacing) fs::remove_all(aside_, ec);
}

}  // namespace hwt
