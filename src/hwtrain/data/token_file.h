// The prepared dataset format (.hwt): one file, a fixed 256-byte little-endian header, then the
// payload: the train tokens followed by the validation tokens, each uint16 or uint32.
//
//   offset size  field
//        0    8  magic "HWTTOKEN"
//        8    4  format version (1)
//       12    4  header size in bytes (256; the payload starts here)
//       16    4  vocabulary size
//       20    2  token dtype = bytes per token (2 or 4)
//       22    2  flags (0; reserved)
//       24    4  shard index (0)   } one file is shard 0 of 1; issue 5's sharded datasets reuse
//       28    4  number of shards  } this header unchanged, one per shard, listed by a manifest
//       32    8  train tokens          48    8  train documents
//       40    8  validation tokens     56    8  validation documents
//       64    8  source fingerprint (see corpus.h)
//       72    4  CRC32C of the payload
//       76    4  CRC32C of the header bytes [0, header size) with this field zeroed
//       80   64  tokenizer name, NUL-padded ("byte")
//      144  112  reserved, zero
//
// TokenFileWriter writes one atomically (temporary sibling, fsync, rename); TokenFile maps one
// read-only and validates everything, checksum included, before handing out spans. A sharded
// dataset (sharded_dataset.h) is a directory of these, one split per shard, listed by a manifest
// that also holds a CRC32C per 4 MiB block of each payload, so corruption is located.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hwtrain/data/token_span.h"

namespace hwt {

namespace fs = std::filesystem;

inline constexpr char kTokenFileMagic[8] = {'H', 'W', 'T', 'T', 'O', 'K', 'E', 'N'};
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr uint32_t kTokenFileHeaderSize = 256;
inline constexpr size_t kTokenizerNameBytes = 64;  // including the terminating NUL
// Payload bytes per block checksum of a shard (manifest "block_crc32c"): small enough to name
// where a shard is corrupt, large enough that a 200 MB shard lists 48 values.
inline constexpr uint64_t kChecksumBlockBytes = uint64_t{4} << 20;

enum class Split { kTrain, kVal };
inline const char* split_name(Split s) { return s == Split::kTrain ? "train" : "validation"; }

struct TokenFileHeader {
  uint32_t version = kTokenFileVersion;
  uint32_t header_size = kTokenFileHeaderSize;
  uint32_t vocab_size = 0;
  TokenDtype dtype = TokenDtype::kUInt16;
  uint32_t shard_index = 0;
  uint32_t num_shards = 1;
  int64_t num_train_tokens = 0;
  int64_t num_val_tokens = 0;
  int64_t num_train_documents = 0;
  int64_t num_val_documents = 0;
  uint64_t fingerprint = 0;
  uint32_t payload_crc32c = 0;
  std::string tokenizer_name;

  int64_t num_tokens() const { return num_train_tokens + num_val_tokens; }
  // header_size + num_tokens * bytes per token.
  uint64_t expected_file_size() const;
};

// The 256 header bytes, header checksum included.
std::string encode_token_file_header(const TokenFileHeader& header);
// Parses and validates header bytes (magic, version, sizes, dtype, vocab, header checksum) of a
// file of `file_size` bytes (which must equal expected_file_size()); DataError names `file`.
TokenFileHeader decode_token_file_header(const void* data, size_t size, uint64_t file_size, const fs::path& file);
// Reads and validates only the header of `file` (no payload checksum): cheap checks of cached files.
TokenFileHeader read_token_file_header(const fs::path& file);
// True when `file` starts with the token file magic (it may still be corrupt).
bool has_token_file_magic(const fs::path& file);

class MappedFile;

class TokenFile {
 public:
  // Maps `path` and validates it; with verify_checksum (the default) the payload CRC32C too:
  // "checksum mismatch in <file>: ... re-run hwtrain prepare".
  explicit TokenFile(const fs::path& path, bool verify_checksum = true);

  const fs::path& path() const { return path_; }
  const TokenFileHeader& header() const { return header_; }
  TokenSpan train() const { return train_; }
  TokenSpan val() const { return val_; }
  TokenSpan split(Split s) const { return s == Split::kTrain ? train_ : val_; }

  int64_t vocab_size() const { return header_.vocab_size; }
  TokenDtype dtype() const { return header_.dtype; }
  const std::string& tokenizer_name() const { return header_.tokenizer_name; }
  uint64_t fingerprint() const { return header_.fingerprint; }
  int64_t num_train_tokens() const { return header_.num_train_tokens; }
  int64_t num_val_tokens() const { return header_.num_val_tokens; }
  int64_t num_train_documents() const { return header_.num_train_documents; }
  int64_t num_val_documents() const { return header_.num_val_documents; }

  // Checks the payload against the header's CRC32C and, when given, against one CRC32C per
  // kChecksumBlockBytes (a manifest's); DataError names the file and the byte range that differs.
  void verify_checksum(const std::vector<uint32_t>* block_crc32c = nullptr) const;

 private:
  fs::path path_;
  std::shared_ptr<const MappedFile> map_;
  TokenFileHeader header_;
  TokenSpan train_, val_;
};

// A token file whose payload is complete in a temporary sibling (tmp) while its header is still all
// zeros; commit_sealed() writes the header and renames it to `path`. The shards of a dataset stay
// sealed until the whole prepare is done, so an interrupted one leaves no shard that looks complete.
// The owner removes `tmp` if it never commits.
struct SealedTokenFile {
  fs::path path, tmp;
  TokenFileHeader header;              // final but for what the caller sets before committing
  std::vector<uint32_t> block_crc32c;  // CRC32C of each kChecksumBlockBytes of payload
  uint64_t payload_bytes() const { return header.expected_file_size() - header.header_size; }
};
// Writes sealed.header (fsync), renames tmp to path (fsync of the directory).
void commit_sealed(const SealedTokenFile& sealed);

// Streams tokens into `path`: train tokens first, then begin_val(), then validation tokens, then
// commit(). Until commit() everything goes to a temporary sibling whose header is all zeros (so
// even it never looks complete); destroying an uncommitted writer removes it, and an existing
// file at `path` is replaced only by the rename in commit().
class TokenFileWriter {
 public:
  // dtype follows dtype_for_vocab(vocab_size). Throws IoError if the directory is not writable.
  TokenFileWriter(const fs::path& path, int64_t vocab_size, const std::string& tokenizer_name,
                  uint64_t fingerprint);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  // Appends ids to the current split; an id outside [0, vocab_size) is a DataError.
  void append(const int32_t* ids, size_t n);
  void append(const std::vector<int32_t>& ids) { append(ids.data(), ids.size()); }
  // Appends one id per byte (byte-level tokenizers: id == byte value), skipping the id vector.
  void append_bytes(const void* bytes, size_t n);
  // Ends the train split; later appends go to validation.
  void begin_val();
  // Writes the header, fsyncs and renames into place; returns the header written.
  TokenFileHeader commit(int64_t num_train_documents, int64_t num_val_documents);
  // Finishes the payload (fsync) but leaves the header zero and the file at its temporary path,
  // now owned by the caller (see SealedTokenFile). Block checksums are filled in.
  SealedTokenFile seal(int64_t num_train_documents, int64_t num_val_documents);
  // Removes the partial files of writers of the same path that were killed (core/files.h's
  // remove_abandoned_temps; this writer holds its own); logs how many. For a single file's
  // writer: a dataset's shards are written in a staging directory that prepare itself cleans.
  void remove_abandoned_siblings() const;
  // The fingerprint written by commit() (known only at the end when reading stdin).
  void set_fingerprint(uint64_t fingerprint) { header_.fingerprint = fingerprint; }

  int64_t num_tokens(Split s) const { return s == Split::kTrain ? num_train_ : num_val_; }

 private:
  template <class T, class Src>
  void append_converted(const Src* src, size_t n);
  void flush();
  void write_all(const void* data, size_t n, uint64_t offset);
  void abort() noexcept;
  void finish_payload(int64_t num_train_documents, int64_t num_val_documents);

  fs::path path_, tmp_;
  int fd_ = -1;
  TokenFileHeader header_;
  bool in_val_ = false;
  int64_t num_train_ = 0, num_val_ = 0;
  uint32_t crc_ = 0;
  uint32_t block_crc_ = 0;             // CRC32C of the current, unfinished block
  std::vector<uint32_t> block_crcs_;   // of the finished blocks
  uint64_t offset_ = 0;  // file offset of the next flush
  std::vector<unsigned char> buffer_;
  size_t buffered_ = 0;
};

// Writes a whole token file at once (tests, small tools).
TokenFileHeader write_token_file(const fs::path& path, int64_t vocab_size, const std::string& tokenizer_name,
                                 uint64_t fingerprint, const std::vector<int32_t>& train_ids,
                                 const std::vector<int32_t>& val_ids, int64_t num_train_documents = 1,
                                 int64_t num_val_documents = 1);

}  // namespace hwt
