#include "hwtrain/io/mapped_safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"

namespace hwt {

// The whole file mapped read-only, unmapped when the last tensor over it and the reader are gone.
// (io/ does not use data/mapped_file.h: io sits below data, and its errors are IoError.)
class MappedSafetensors::Mapping {
 public:
  explicit Mapping(const std::filesystem::path& path) {
    // O_NONBLOCK: a FIFO opens at once and fails the regular-file check instead of hanging.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      throw IoError("cannot read " + path.string() + ": " + (errno == ENOENT ? "no such file" : std::strerror(errno)));
    }
    struct stat st {};
    std::string why;
    if (::fstat(fd, &st) != 0) {
      why = std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
      why = "not a regular file";
    }
    if (!why.empty()) {
      ::close(fd);
      throw IoError("cannot read " + path.string() + ": " + why);
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        throw IoError("cannot memory-map " + path.string() + ": " + why);
      }
      data_ = static_cast<const unsigned char*>(p);
    }
    ::close(fd);  // the mapping keeps the file open
  }
  ~Mapping() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  const unsigned char* data() const { return data_; }
  uint64_t size() const { return size_; }

  // Drops the whole pages of [begin, end) from the resident set; the file still backs them.
  void release(uint64_t begin, uint64_t end) const {
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    begin = begin / page * page;
    end = std::min(size_, (end + page - 1) / page * page);
    if (data_ == nullptr || begin >= end) return;
    ::madvise(const_cast<unsigned char*>(data_ + begin), end - begin, MADV_DONTNEED);  // advice only
  }

 private:
  const unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
};

MappedSafetensors::MappedSafetensors(const std::filesystem::path& path)
    : path_(path), map_(std::make_shared<const Mapping>(path)) {
  const auto* bytes = reinterpret_cast<const char*>(map_->data());
  const uint64_t size = map_->size();
  const std::string_view prefix(bytes, std::min(size, kSafetensorsLengthBytes));
  const uint64_t header_size = check_safetensors_header_length(path_, size, prefix);
  header_ = parse_safetensors_header(path_, size, std::string_view(bytes + kSafetensorsLengthBytes, header_size));
  for (size_t i = 0; i < header_.entries.size(); ++i) index_.emplace(header_.entries[i].name, i);
}

std::vector<std::string> MappedSafetensors::names() const {
  std::vector<std::string> out;
  out.reserve(header_.entries.size());
  for (const auto& e : header_.entries) out.push_back(e.name);
  return out;
}

const SafetensorsEntry& MappedSafetensors::entry(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) throw IoError(path_.string() + " has no tensor '" + name + "'" + did_you_mean(name, names()));
  return header_.entries[it->second];
}

torch::Tensor MappedSafetensors::get(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const auto options = torch::TensorOptions().dtype(e.dtype);
  const uint64_t nbytes = e.end - e.begin;
  if (nbytes == 0) return torch::empty(e.shape, options);  // no bytes to point at
  const unsigned char* bytes = map_->data() + header_.data_start + e.begin;
  if (reinterpret_cast<uintptr_t>(bytes) % c10::elementSize(e.dtype) != 0) {
    // Misaligned for its dtype (vectorized kernels assume alignment): a copy of its own.
    torch::Tensor copy = torch::empty(e.shape, options);
    std::memcpy(copy.data_ptr(), bytes, nbytes);
    return copy;
  }
  std::shared_ptr<const Mapping> keep_alive = map_;
  return torch::from_blob(const_cast<unsigned char*>(bytes), e.shape, [keep_alive](void*) {}, options);
}

NamedTensors MappedSafetensors::tensors() const {
  NamedTensors out;
  out.reserve(header_.entries.size());
  for (const auto& e : header_.entries) out.emplace_back(e.name, get(e.name));
  return out;
}

void MappedSafetensors::release_pages(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  map_->release(header_.data_start + e.begin, header_.data_start + e.end);
}

}  // namespace hwt
