// Chunk checksums: besides each checkpoint file's CRC32C, its COMPLETE marker records the CRC32C of
// every fixed-size chunk of a file larger than one chunk (checkpoint_store.h), so that a reader of
// some ranges of a large file checks only the chunks those ranges touch. A ZeRO-2/3 rank resuming
// on another world size reads parts of two or three shard files (train/sharded_checkpoint_reader.h);
// with whole-file checksums it had to read all of each, at 70B scale gigabytes per rank.
// RangeVerifier checks each chunk once, and a file recorded without chunks (small, or written by an
// older build) whole, the first time any of it is read.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/io/checkpoint_store.h"

namespace hwt {

struct FileChecksums {
  uint32_t whole = 0;
  std::vector<uint32_t> chunks;  // of chunk_bytes each (the last: the rest); empty when chunk_bytes is 0
};

// The marker's form of a file's chunk checksums: 8 lower-case hex digits each, most significant
// first, concatenated; and back (nullopt for a length not a multiple of 8 or a non-hex character).
std::string chunk_checksums_hex(const std::vector<uint32_t>& sums);
std::optional<std::vector<uint32_t>> parse_chunk_checksums_hex(const std::string& hex);

// The chunk size a checkpoint of files of `sizes` records: `chunk_bytes`, doubled (up to
// kMaxChecksumChunkBytes) until its files of more than one chunk have at most kMaxMarkerChunks in all.
uint64_t marker_chunk_bytes(const std::vector<uint64_t>& sizes, uint64_t chunk_bytes);

// A COMPLETE marker's file entry's chunk checksums (checkpoint_store.cpp): written as chunk_bytes and
// chunk_crc32c_hex for a file with chunks; read back checked (chunk_bytes in [4 KiB, 1 GiB], one
// CRC32C per chunk, as the hex string or, from older builds, a chunk_crc32c list of numbers), any
// fault thrown as bad(why) naming the file. An entry without them leaves `file` without chunks.
void write_marker_chunk_checksums(const CheckpointFile& file, nlohmann::json& entry);
void read_marker_chunk_checksums(const nlohmann::json& entry, CheckpointFile& file,
                                 const std::function<IoError(const std::string&)>& bad);

// Reads `path` once for its CRC32C and, with chunk_bytes > 0, each chunk's. IoError naming the file.
FileChecksums file_checksums(const fs::path& path, uint64_t chunk_bytes);

// Checks byte ranges of one file a checkpoint's marker lists against the marker's record.
class RangeVerifier {
 public:
  RangeVerifier(fs::path ckpt, CheckpointFile file);
  // Verifies the chunks overlapping [from, to) not checked yet (the whole file, once, without
  // chunks). IoError naming the file and the failing chunk's byte range; nothing read past the
  // recorded size.
  void check(uint64_t from, uint64_t to);
  uint64_t bytes_checked() const { return bytes_checked_; }

 private:
  void check_chunk(size_t chunk);

  fs::path ckpt_;
  CheckpointFile file_;
  std::vector<bool> checked_;  // by chunk
  bool whole_checked_ = false;
  uint64_t bytes_checked_ = 0;
};

}  // namespace hwt
