#include "hwtrain/obs/sink_file.h"

#include <cerrno>
#include <cstring>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/log.h"

namespace hwt {

SinkFile::SinkFile(const std::filesystem::path& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (!file_) {
    throw IoError("cannot write " + path.string() + ": " + std::strerror(errno) +
                  " (choose a writable run directory with --out)");
  }
  if (append) {
    std::fseek(file_, 0, SEEK_END);
    initial_size_ = std::ftell(file_);
  }
}

SinkFile::~SinkFile() {
  if (!file_) return;
  if (std::fclose(file_) != 0) report_failure("close");
}

void SinkFile::write(const std::string& bytes) { write(bytes.data(), bytes.size()); }

void SinkFile::write(const void* data, size_t size) {
  if (size > 0 && std::fwrite(data, 1, size, file_) != size) report_failure("write");
}

void SinkFile::flush() {
  if (std::fflush(file_) != 0) report_failure("flush");
}

void SinkFile::report_failure(const char* what) {
  if (failed_) return;
  failed_ = true;
  warn_once("sink:" + path_.string(), std::string("cannot ") + what + " " + path_.string() + ": " +
                                          std::strerror(errno) +
                                          "; metrics written after this point may be lost");
}

}  // namespace hwt
