// TokenSpan: a read-only view of tokens stored as little-endian uint16 or uint32 (the on-disk
// dtypes), read as int64. It shares ownership of the memory it views (a mapped token file), so a
// span stays valid after the TokenFile it came from is gone. Copying a span is cheap.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace hwt {

// Bytes per token on disk; the value is what the token file header stores.
enum class TokenDtype : uint16_t { kUInt16 = 2, kUInt32 = 4 };

inline int64_t dtype_bytes(TokenDtype d) { return static_cast<int64_t>(d); }
inline const char* dtype_name(TokenDtype d) { return d == TokenDtype::kUInt16 ? "uint16" : "uint32"; }
// uint16 when every id fits (vocabularies up to 65536), else uint32.
inline TokenDtype dtype_for_vocab(int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDtype::kUInt16 : TokenDtype::kUInt32;
}

class TokenSpan {
 public:
  TokenSpan() = default;
  // `data` holds `size` tokens of `dtype`; `owner` keeps that memory alive (may be null for memory
  // the caller keeps alive itself).
  TokenSpan(const void* data, int64_t size, TokenDtype dtype, std::shared_ptr<const void> owner = nullptr)
      : data_(static_cast<const unsigned char*>(data)), size_(size), dtype_(dtype), owner_(std::move(owner)) {}

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  TokenDtype dtype() const { return dtype_; }
  const void* data() const { return data_; }

  // Unchecked, as std::vector::operator[]; the x86-64 hosts hwtrain targets are little-endian,
  // like the file format, so a plain load reads a token.
  int64_t operator[](int64_t i) const {
    if (dtype_ == TokenDtype::kUInt16) {
      uint16_t v;
      std::memcpy(&v, data_ + 2 * i, 2);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, data_ + 4 * i, 4);
    return v;
  }

  // out[0..n) = tokens [offset, offset + n); throws std::out_of_range outside the span.
  void copy_window(int64_t offset, int64_t n, int64_t* out) const {
    check_range(offset, n);
    if (dtype_ == TokenDtype::kUInt16) {
      widen(reinterpret_cast<const uint16_t*>(data_) + offset, n, out);
    } else {
      widen(reinterpret_cast<const uint32_t*>(data_) + offset, n, out);
    }
  }

  TokenSpan subspan(int64_t offset, int64_t n) const {
    check_range(offset, n);
    return TokenSpan(data_ + offset * dtype_bytes(dtype_), n, dtype_, owner_);
  }

 private:
  void check_range(int64_t offset, int64_t n) const {
    if (offset < 0 || n < 0 || offset > size_ - n) {
      throw std::out_of_range("token window [" + std::to_string(offset) + ", " + std::to_string(offset + n) +
                              ") outside a span of " + std::to_string(size_) + " tokens");
    }
  }
  // A plain loop the compiler vectorizes (zero-extending loads); the mapped data is aligned to the
  // token size because the header size is a multiple of 4.
  template <class T>
  static void widen(const T* src, int64_t n, int64_t* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(src[i]);
  }

  const unsigned char* data_ = nullptr;
  int64_t size_ = 0;
  TokenDtype dtype_ = TokenDtype::kUInt16;
  std::shared_ptr<const void> owner_;
};

}  // namespace hwt
