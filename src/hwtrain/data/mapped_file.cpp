#include "hwtrain/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hwtrain/core/error.h"

namespace hwt {

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  // O_NONBLOCK: a FIFO named by a manifest opens at once and fails the regular-file check below
  // instead of hanging the open; mmap ignores the flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw DataError("cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    throw DataError("cannot stat " + path.string() + ": " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw DataError(path.string() + " is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      std::string why = std::strerror(errno);
      ::close(fd);
      throw DataError("cannot memory-map " + path.string() + ": " + why);
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping keeps the file open
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

void MappedFile::advise_sequential() const {
  if (data_ != nullptr) ::madvise(const_cast<unsigned char*>(data_), size_, MADV_SEQUENTIAL);
}

void MappedFile::advise_random() const {
  if (data_ != nullptr) ::madvise(const_cast<unsigned char*>(data_), size_, MADV_RANDOM);
}

void MappedFile::advise_normal() const {
  if (data_ != nullptr) ::madvise(const_cast<unsigned char*>(data_), size_, MADV_NORMAL);
}

}  // namespace hwt
