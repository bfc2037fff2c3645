// MappedFile: a whole file memory-mapped read-only (mmap), unmapped on destruction. Token files and
// (later) shards are read through it, so a dataset larger than memory costs only page cache.
#pragma once
#include <cstddef>
#include <filesystem>

namespace hwt {

class MappedFile {
 public:
  // Maps `path`; throws DataError naming the path if it cannot be opened or mapped. An empty file
  // maps to data() == nullptr, size() == 0.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

  // Hints the kernel about the access pattern (sequential for checksums, random for sampling).
  void advise_sequential() const;
  void advise_random() const;
  void advise_normal() const;

 private:
  std::filesystem::path path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hwt
