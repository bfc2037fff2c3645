#include "hwtrain/data/token_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"
#include "hwtrain/data/mapped_file.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token files are little-endian and read by plain loads; a big-endian host needs byte swaps");

namespace hwt {

namespace {

constexpr size_t kHeaderCrcOffset = 76;
constexpr size_t kTokenizerOffset = 80;

template <class T>
void put(std::string& out, size_t offset, T value) {
  std::memcpy(&out[offset], &value, sizeof(T));
}
template <class T>
T get(const unsigned char* p, size_t offset) {
  T v;
  std::memcpy(&v, p + offset, sizeof(T));
  return v;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08" PRIx32, v);
  return buf;
}

[[noreturn]] void bad_token_file(const fs::path& file, const std::string& what) {
  throw DataError(file.string() + ": " + what + "; re-run hwtrain prepare");
}

}  // namespace

uint64_t TokenFileHeader::expected_file_size() const {
  return uint64_t{header_size} + static_cast<uint64_t>(num_tokens()) * static_cast<uint64_t>(dtype_bytes(dtype));
}

std::string encode_token_file_header(const TokenFileHeader& h) {
  if (h.tokenizer_name.size() >= kTokenizerNameBytes) {
    throw DataError("tokenizer name '" + h.tokenizer_name + "' is longer than the token file's " +
                    std::to_string(kTokenizerNameBytes - 1) + "-byte field");
  }
  std::string out(kTokenFileHeaderSize, '\0');
  std::memcpy(&out[0], kTokenFileMagic, 8);
  put<uint32_t>(out, 8, h.version);
  put<uint32_t>(out, 12, kTokenFileHeaderSize);
  put<uint32_t>(out, 16, h.vocab_size);
  put<uint16_t>(out, 20, static_cast<uint16_t>(h.dtype));
  put<uint16_t>(out, 22, 0);
  put<uint32_t>(out, 24, h.shard_index);
  put<uint32_t>(out, 28, h.num_shards);
  put<uint64_t>(out, 32, static_cast<uint64_t>(h.num_train_tokens));
  put<uint64_t>(out, 40, static_cast<uint64_t>(h.num_val_tokens));
  put<uint64_t>(out, 48, static_cast<uint64_t>(h.num_train_documents));
  put<uint64_t>(out, 56, static_cast<uint64_t>(h.num_val_documents));
  put<uint64_t>(out, 64, h.fingerprint);
  put<uint32_t>(out, 72, h.payload_crc32c);
  std::memcpy(&out[kTokenizerOffset], h.tokenizer_name.data(), h.tokenizer_name.size());
  put<uint32_t>(out, kHeaderCrcOffset, crc32c(out.data(), out.size()));
  return out;
}

TokenFileHeader decode_token_file_header(const void* data, size_t size, uint64_t file_size, const fs::path& file) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (size < 8 || file_size < 8 || std::memcmp(p, kTokenFileMagic, 8) != 0) {
    throw DataError(file.string() + " is not a hwtrain token file (no HWTTOKEN magic; it has " +
                    std::to_string(file_size) + " bytes); prepare one with hwtrain prepare");
  }
  if (size < kTokenFileHeaderSize) {
    bad_token_file(file, "truncated: " + std::to_string(file_size) + " bytes, fewer than the " +
                  std::to_string(kTokenFileHeaderSize) + "-byte header");
  }
  TokenFileHeader h;
  h.version = get<uint32_t>(p, 8);
  if (h.version != kTokenFileVersion) {
    throw DataError(file.string() + " has token file format version " + std::to_string(h.version) +
                    "; this hwtrain reads version " + std::to_string(kTokenFileVersion) + "; re-run hwtrain prepare");
  }
  h.header_size = get<uint32_t>(p, 12);
  if (h.header_size != kTokenFileHeaderSize) {
    bad_token_file(file, "header size " + std::to_string(h.header_size) + ", expected " + std::to_string(kTokenFileHeaderSize));
  }
  std::string copy(reinterpret_cast<const char*>(p), kTokenFileHeaderSize);
  uint32_t stored_crc = get<uint32_t>(p, kHeaderCrcOffset);
  put<uint32_t>(copy, kHeaderCrcOffset, 0);
  uint32_t actual_crc = crc32c(copy.data(), copy.size());
  if (stored_crc != actual_crc) {
    bad_token_file(file, "header checksum mismatch (CRC32C " + hex32(actual_crc) + ", header says " + hex32(stored_crc) +
                  "): the file is corrupt");
  }
  h.vocab_size = get<uint32_t>(p, 16);
  uint16_t dtype = get<uint16_t>(p, 20);
  if (dtype != 2 && dtype != 4) bad_token_file(file, "token dtype " + std::to_string(dtype) + " bytes; valid: 2 or 4");
  h.dtype = static_cast<TokenDtype>(dtype);
  if (h.vocab_size == 0) bad_token_file(file, "vocabulary size 0");
  if (h.dtype == TokenDtype::kUInt16 && h.vocab_size > 65536) {
    bad_token_file(file, "vocabulary of " + std::to_string(h.vocab_size) + " does not fit its uint16 tokens");
  }
  h.shard_index = get<uint32_t>(p, 24);
  h.num_shards = get<uint32_t>(p, 28);
  if (h.num_shards == 0 || h.shard_index >= h.num_shards) {
    bad_token_file(file, "shard " + std::to_string(h.shard_index) + " of " + std::to_string(h.num_shards));
  }
  uint64_t counts[4];
  for (int i = 0; i < 4; ++i) {
    counts[i] = get<uint64_t>(p, 32 + 8 * i);
    if (counts[i] > (uint64_t{1} << 56)) bad_token_file(file, "implausible count " + std::to_string(counts[i]) + " in header");
  }
  h.num_train_tokens = static_cast<int64_t>(counts[0]);
  h.num_val_tokens = static_cast<int64_t>(counts[1]);
  h.num_train_documents = static_cast<int64_t>(counts[2]);
  h.num_val_documents = static_cast<int64_t>(counts[3]);
  h.fingerprint = get<uint64_t>(p, 64);
  h.payload_crc32c = get<uint32_t>(p, 72);
  const char* name = reinterpret_cast<const char*>(p + kTokenizerOffset);
  h.tokenizer_name.assign(name, strnlen(name, kTokenizerNameBytes - 1));

  uint64_t expected = h.expected_file_size();
  if (file_size != expected) {
    bad_token_file(file, std::string(file_size < expected ? "truncated at byte " : "has trailing data from byte ") +
                  std::to_string(std::min(file_size, expected)) + ": expected " +
                  std::to_string(expected) + " bytes (" + std::to_string(h.header_size) + "-byte header + " +
                  std::to_string(h.num_tokens()) + " tokens x " + std::to_string(dtype) + " bytes), found " +
                  std::to_string(file_size));
  }
  return h;
}

TokenFileHeader read_token_file_header(const fs::path& file) {
  std::error_code ec;
  uint64_t file_size = fs::file_size(file, ec);
  if (ec) throw DataError("cannot read token file " + file.string() + ": " + ec.message());
  unsigned char buf[kTokenFileHeaderSize] = {};
  size_t got = 0;
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError("cannot open token file " + file.string() + ": " + std::strerror(errno));
  while (got < sizeof buf) {
    ssize_t n = ::read(fd, buf + got, sizeof buf - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return decode_token_file_header(buf, got, file_size, file);
}

bool has_token_file_magic(const fs::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8];
  ssize_t n = ::read(fd, buf, 8);
  ::close(fd);
  return n == 8 && std::memcmp(buf, kTokenFileMagic, 8) == 0;
}

TokenFile::TokenFile(const fs::path& path, bool verify_checksum) : path_(path) {
  auto map = std::make_shared<const MappedFile>(path);
  header_ = decode_token_file_header(map->data(), map->size(), map->size(), path);
  const unsigned char* payload = map->data() + header_.header_size;
  map_ = map;
  if (verify_checksum) this->verify_checksum();
  int64_t bytes = dtype_bytes(header_.dtype);
  train_ = TokenSpan(payload, header_.num_train_tokens, header_.dtype, map_);
  val_ = TokenSpan(payload + header_.num_train_tokens * bytes, header_.num_val_tokens, header_.dtype, map_);
}

void TokenFile::verify_checksum(const std::vector<uint32_t>* block_crc32c) const {
  const unsigned char* payload = map_->data() + header_.header_size;
  const uint64_t payload_bytes = map_->size() - header_.header_size;
  map_->advise_sequential();
  const uint64_t num_blocks = (payload_bytes + kChecksumBlockBytes - 1) / kChecksumBlockBytes;
  if (block_crc32c != nullptr && block_crc32c->size() != num_blocks) {
    throw DataError("checksum list for " + path_.string() + " has " + std::to_string(block_crc32c->size()) +
                    " blocks, the file's " + std::to_string(payload_bytes) + "-byte payload has " +
                    std::to_string(num_blocks) + "; the manifest does not belong to this shard, re-run hwtrain prepare");
  }
  uint32_t crc = 0;
  for (uint64_t b = 0; b < num_blocks; ++b) {
    const uint64_t begin = b * kChecksumBlockBytes;
    const uint64_t n = std::min(kChecksumBlockBytes, payload_bytes - begin);
    if (block_crc32c != nullptr) {
      uint32_t block = crc32c(payload + begin, n);
      if (block != (*block_crc32c)[b]) {
        const uint64_t at = header_.header_size + begin;
        throw DataError("checksum mismatch in " + path_.string() + " at bytes [" + std::to_string(at) + ", " +
                        std::to_string(at + n) + "): CRC32C " + hex32(block) + ", manifest says " +
                        hex32((*block_crc32c)[b]) + "; the shard is corrupt, re-run hwtrain prepare");
      }
    }
    crc = crc32c_extend(crc, payload + begin, n);
  }
  map_->advise_normal();  // sequential was for this pass; training reads windows anywhere
  if (crc != header_.payload_crc32c) {
    throw DataError("checksum mismatch in " + path_.string() + " in the payload at bytes [" +
                    std::to_string(header_.header_size) + ", " + std::to_string(map_->size()) + "): CRC32C " +
                    hex32(crc) + ", header says " + hex32(header_.payload_crc32c) +
                    "; the file is corrupt, re-run hwtrain prepare");
  }
}

}  // namespace hwt
