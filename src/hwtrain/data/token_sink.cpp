#include "hwtrain/data/token_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"

namespace hwt {

namespace {
constexpr size_t kSpillTokens = size_t{1} << 18;  // 1 MiB of int32 per write
}

SingleFileSink::SingleFileSink(const std::filesystem::path& path, int64_t vocab_size, const std::string& tokenizer_name)
    : writer_(path, vocab_size, tokenizer_name, 0) {
  writer_.remove_abandoned_siblings();
  std::filesystem::path spill = temp_sibling(path);
  spill_fd_ = ::open(spill.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (spill_fd_ < 0) throw IoError("cannot create " + spill.string() + ": " + std::strerror(errno));
  ::unlink(spill.c_str());
  spill_buffer_.reserve(kSpillTokens);
}

SingleFileSink::~SingleFileSink() {
  if (spill_fd_ >= 0) ::close(spill_fd_);
}

void SingleFileSink::begin_document(Split s) { ++num_documents_[s == Split::kTrain ? 0 : 1]; }

void SingleFileSink::append(Split s, const int32_t* ids, size_t n) {
  if (s == Split::kTrain) {
    writer_.append(ids, n);
  } else {
    spill(ids, n);
  }
}

void SingleFileSink::append_bytes(Split s, const char* bytes, size_t n) {
  if (s == Split::kTrain) {
    writer_.append_bytes(bytes, n);
    return;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes);
  while (n > 0) {
    size_t take = std::min(n, kSpillTokens - spill_buffer_.size());
    for (size_t i = 0; i < take; ++i) spill_buffer_.push_back(p[i]);
    p += take;
    n -= take;
    num_spilled_ += static_cast<int64_t>(take);
    if (spill_buffer_.size() == kSpillTokens) flush_spill();
  }
}

void SingleFileSink::spill(const int32_t* ids, size_t n) {
  while (n > 0) {
    size_t take = std::min(n, kSpillTokens - spill_buffer_.size());
    spill_buffer_.insert(spill_buffer_.end(), ids, ids + take);
    ids += take;
    n -= take;
    num_spilled_ += static_cast<int64_t>(take);
    if (spill_buffer_.size() == kSpillTokens) flush_spill();
  }
}

void SingleFileSink::flush_spill() {
  const char* p = reinterpret_cast<const char*>(spill_buffer_.data());
  size_t left = spill_buffer_.size() * sizeof(int32_t);
  while (left > 0) {
    ssize_t w = ::write(spill_fd_, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw IoError(std::string("cannot write the validation spill file: ") + std::strerror(errno));
    p += w;
    left -= static_cast<size_t>(w);
  }
  spill_buffer_.clear();
}

TokenFileHeader SingleFileSink::commit(uint64_t fingerprint) {
  flush_spill();
  writer_.begin_val();
  if (::lseek(spill_fd_, 0, SEEK_SET) != 0) throw IoError(std::string("cannot rewind the spill file: ") + std::strerror(errno));
  spill_buffer_.resize(kSpillTokens);
  int64_t left = num_spilled_;
  while (left > 0) {
    size_t want = static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(kSpillTokens))) * sizeof(int32_t);
    size_t got = 0;
    char* dst = reinterpret_cast<char*>(spill_buffer_.data());
    while (got < want) {
      ssize_t r = ::read(spill_fd_, dst + got, want - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw IoError(std::string("cannot read back the validation spill file: ") + std::strerror(errno));
      got += static_cast<size_t>(r);
    }
    writer_.append(spill_buffer_.data(), want / sizeof(int32_t));
    left -= static_cast<int64_t>(want / sizeof(int32_t));
  }
  writer_.set_fingerprint(fingerprint);
  return writer_.commit(num_documents_[0], num_documents_[1]);
}

}  // namespace hwt
