// SinkFile: an output file of a metric sink. Opens at construction (IoError naming the path when
// it cannot), buffers writes in stdio, flushes on request and closes in the destructor. A write
// or flush failure later in the run (disk full) is warned about once and does not stop training:
// metrics are not worth losing the model for.
#pragma once
#include <cstdio>
#include <filesystem>
#include <string>

namespace hwt {

class SinkFile {
 public:
  // `append` keeps existing content (a resumed run); otherwise the file is replaced.
  SinkFile(const std::filesystem::path& path, bool append);
  ~SinkFile();
  SinkFile(const SinkFile&) = delete;
  SinkFile& operator=(const SinkFile&) = delete;

  void write(const std::string& bytes);
  void write(const void* data, size_t size);
  void flush();
  // Bytes in the file when it was opened (0 for a new or replaced file).
  long initial_size() const { return initial_size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void report_failure(const char* what);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  long initial_size_ = 0;
  bool failed_ = false;
};

}  // namespace hwt
