// PreparedOutputDir: the output directory of a sharded prepare, replaced as a whole. The new
// dataset is written into a staging sibling (".<name>.staging-<pid>"), and only commit() puts it
// in place of the old one (old aside, new in, old removed), so a prepare killed at any moment
// (kill -9, a full disk) leaves the previous dataset as it was; the next prepare removes the
// staging leftovers, and puts an old dataset back when a prepare died between the two renames.
// A directory that holds anything but a dataset is refused, so a mistyped --output never
// replaces someone's files.
#pragma once
#include <filesystem>

namespace hwt {

class PreparedOutputDir {
 public:
  // ConfigError when `dir` is a file, or a non-empty directory that holds anything but a dataset.
  explicit PreparedOutputDir(const std::filesystem::path& dir);
  // Without commit() (an error), the staging directory is removed and the old dataset stays.
  ~PreparedOutputDir();
  PreparedOutputDir(const PreparedOutputDir&) = delete;
  PreparedOutputDir& operator=(const PreparedOutputDir&) = delete;
  // Where the new dataset's files go (created empty).
  const std::filesystem::path& staging() const { return staging_; }
  // Replaces the dataset at `dir` with the staging directory's (durably: fsync, rename, fsync).
  void commit();

 private:
  std::filesystem::path dir_, staging_, aside_;
  bool committed_ = false;
};

}  // namespace hwt
