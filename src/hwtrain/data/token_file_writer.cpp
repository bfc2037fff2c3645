// TokenFileWriter and write_token_file (see token_file.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/token_file.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace {
constexpr size_t kBufferBytes = size_t{1} << 20;  // large writes, few syscalls
}

TokenFileWriter::TokenFileWriter(const fs::path& path, int64_t vocab_size, const std::string& tokenizer_name,
                                 uint64_t fingerprint)
    : path_(path) {
  if (vocab_size <= 0 || vocab_size > (int64_t{1} << 31)) {
    throw DataError("cannot write " + path.string() + ": vocabulary size " + std::to_string(vocab_size) +
                    " is outside [1, 2^31]");
  }
  header_.vocab_size = static_cast<uint32_t>(vocab_size);
  header_.dtype = dtype_for_vocab(vocab_size);
  header_.tokenizer_name = tokenizer_name;
  header_.fingerprint = fingerprint;
  encode_token_file_header(header_);  // rejects a tokenizer name that does not fit, before any I/O
  fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  ensure_writable_dir(dir);
  // A new file (O_EXCL: never a dead writer's of a reused pid), locked while it has no bytes, so
  // remove_abandoned_temps never takes it for abandoned.
  for (int tries = 0; fd_ < 0; ++tries) {
    tmp_ = temp_sibling(path);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || tries >= 100)) {
      throw IoError("cannot write " + tmp_.string() + ": " + std::strerror(errno));
    }
  }
  if (!hold_temp_file(fd_)) {
    abort();
    throw IoError("cannot lock " + tmp_.string() + ": another process holds it");
  }
  // A zero header until commit: a reader rejects this file (no magic) however far it got.
  std::string zeros(kTokenFileHeaderSize, '\0');
  write_all(zeros.data(), zeros.size(), 0);
  offset_ = kTokenFileHeaderSize;
  buffer_.resize(kBufferBytes);
}

TokenFileWriter::~TokenFileWriter() { abort(); }

void TokenFileWriter::remove_abandoned_siblings() const {
  if (const int n = remove_abandoned_temps(path_); n > 0) {
    log_info("data: removed {} partial file(s) of an interrupted write of {}", n, path_.string());
  }
}

void TokenFileWriter::abort() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
  }
}

void TokenFileWriter::write_all(const void* data, size_t n, uint64_t offset) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      std::string why = std::strerror(errno);
      abort();
      throw IoError("cannot write " + path_.string() + ": " + why);
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

void TokenFileWriter::flush() {
  if (buffered_ == 0) return;
  crc_ = crc32c_extend(crc_, buffer_.data(), buffered_);
  // Block checksums: the payload offset of buffer_[0] is offset_ - header size.
  uint64_t pos = offset_ - kTokenFileHeaderSize;
  size_t done = 0;
  while (done < buffered_) {
    uint64_t room = kChecksumBlockBytes - pos % kChecksumBlockBytes;
    size_t take = static_cast<size_t>(std::min<uint64_t>(room, buffered_ - done));
    block_crc_ = crc32c_extend(block_crc_, buffer_.data() + done, take);
    done += take;
    pos += take;
    if (pos % kChecksumBlockBytes == 0) {
      block_crcs_.push_back(block_crc_);
      block_crc_ = 0;
    }
  }
  write_all(buffer_.data(), buffered_, offset_);
  offset_ += buffered_;
  buffered_ = 0;
}

template <class T, class Src>
void TokenFileWriter::append_converted(const Src* src, size_t n) {
  if (fd_ < 0) throw DataError("token file writer for " + path_.string() + " is closed");
  const size_t per_buffer = buffer_.size() / sizeof(T);
  while (n > 0) {
    size_t room = per_buffer - buffered_ / sizeof(T);
    size_t take = n < room ? n : room;
    T* dst = reinterpret_cast<T*>(buffer_.data() + buffered_);
    for (size_t i = 0; i < take; ++i) dst[i] = static_cast<T>(src[i]);
    buffered_ += take * sizeof(T);
    src += take;
    n -= take;
    (in_val_ ? num_val_ : num_train_) += static_cast<int64_t>(take);
    if (buffered_ == buffer_.size()) flush();
  }
}

void TokenFileWriter::append(const int32_t* ids, size_t n) {
  const int32_t vocab = static_cast<int32_t>(header_.vocab_size);
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      throw DataError("cannot write " + path_.string() + ": token id " + std::to_string(ids[i]) +
                      " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  if (header_.dtype == TokenDtype::kUInt16) {
    append_converted<uint16_t>(ids, n);
  } else {
    append_converted<uint32_t>(ids, n);
  }
}

void TokenFileWriter::append_bytes(const void* bytes, size_t n) {
  if (header_.vocab_size < 256) {
    throw DataError("cannot write " + path_.string() + ": byte tokens need a vocabulary of at least 256, not " +
                    std::to_string(header_.vocab_size));
  }
  const auto* src = static_cast<const uint8_t*>(bytes);
  if (header_.dtype == TokenDtype::kUInt16) {
    append_converted<uint16_t>(src, n);
  } else {
    append_converted<uint32_t>(src, n);
  }
}

void TokenFileWriter::begin_val() { in_val_ = true; }

void TokenFileWriter::finish_payload(int64_t num_train_documents, int64_t num_val_documents) {
  if (fd_ < 0) throw DataError("token file writer for " + path_.string() + " is closed");
  flush();
  if ((offset_ - kTokenFileHeaderSize) % kChecksumBlockBytes != 0) block_crcs_.push_back(block_crc_);
  header_.num_train_tokens = num_train_;
  header_.num_val_tokens = num_val_;
  header_.num_train_documents = num_train_documents;
  header_.num_val_documents = num_val_documents;
  header_.payload_crc32c = crc_;
}

namespace {

// fsync + close of a token file being written; unlinks `tmp` and throws IoError naming `path` on failure.
void sync_and_close(int fd, const fs::path& tmp, const fs::path& path) {
  int rc = ::fsync(fd);
  int saved = errno;
  if (::close(fd) != 0 && rc == 0) {
    rc = -1;
    saved = errno;
  }
  if (rc != 0) {
    ::unlink(tmp.c_str());
    throw IoError("cannot flush " + path.string() + ": " + std::strerror(saved));
  }
}

}  // namespace

TokenFileHeader TokenFileWriter::commit(int64_t num_train_documents, int64_t num_val_documents) {
  finish_payload(num_train_documents, num_val_documents);
  std::string header = encode_token_file_header(header_);
  write_all(header.data(), header.size(), 0);
  if (::fsync(fd_) != 0) {
    const int saved = errno;
    abort();
    throw IoError("cannot flush " + path_.string() + ": " + std::strerror(saved));
  }
  try {
    rename_durable(tmp_, path_);  // still open, so still locked: no other writer takes it for abandoned
  } catch (...) {
    abort();
    throw;
  }
  ::close(fd_);
  fd_ = -1;
  return header_;
}

SealedTokenFile TokenFileWriter::seal(int64_t num_train_documents, int64_t num_val_documents) {
  finish_payload(num_train_documents, num_val_documents);
  int fd = fd_;
  fd_ = -1;
  sync_and_close(fd, tmp_, path_);
  SealedTokenFile sealed;
  sealed.path = path_;
  sealed.tmp = tmp_;
  sealed.header = header_;
  sealed.block_crc32c = std::move(block_crcs_);
  return sealed;
}

void commit_sealed(const SealedTokenFile& sealed) {
  std::string header = encode_token_file_header(sealed.header);
  int fd = ::open(sealed.tmp.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot write " + sealed.tmp.string() + ": " + std::strerror(errno));
  const char* p = header.data();
  size_t n = header.size();
  off_t off = 0;
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      throw IoError("cannot write " + sealed.path.string() + ": " + why);
    }
    p += w;
    n -= static_cast<size_t>(w);
    off += w;
  }
  sync_and_close(fd, sealed.tmp, sealed.path);
  rename_durable(sealed.tmp, sealed.path);
}

TokenFileHeader write_token_file(const fs::path& path, int64_t vocab_size, const std::string& tokenizer_name,
                                 uint64_t fingerprint, const std::vector<int32_t>& train_ids,
                                 const std::vector<int32_t>& val_ids, int64_t num_train_documents,
                                 int64_t num_val_documents) {
  TokenFileWriter writer(path, vocab_size, tokenizer_name, fingerprint);
  writer.remove_abandoned_siblings();
  writer.append(train_ids);
  writer.begin_val();
  writer.append(val_ids);
  return writer.commit(num_train_documents, num_val_documents);
}

}  // namespace hwt
