// PreparedOutputDir: the output directory of a sharded prepare. Created when missing. A previous
// dataset there (manifest.json, train-*/val-*.hwt shards, tokenizer files, temporaries left by an
// interrupted prepare) is replaced: its manifest and tokenizer files go first, so the directory is
// never a dataset that mixes old and new shards; old shards the new dataset does not overwrite are
// removed once the new manifest is in place. Any other non-empty directory is refused.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace hwt {

class PreparedOutputDir {
 public:
  // ConfigError when `dir` is a file, or a non-empty directory that holds anything but a dataset.
  explicit PreparedOutputDir(const std::filesystem::path& dir);
  // Removes the previous dataset's shards whose names are not in `kept`.
  void remove_stale(const std::vector<std::string>& kept);

 private:
  std::filesystem::path dir_;
  std::vector<std::string> old_shards_;
};

}  // namespace hwt
