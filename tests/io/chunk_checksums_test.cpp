// Chunk checksums: each chunk's CRC32C is that of its bytes; the COMPLETE marker records chunks for
// files of more than one chunk only, as a hex string (an older build's list of numbers still read),
// with chunks grown only where a marker would hold too many, and refuses malformed chunk entries; a RangeVerifier checks just
// the chunks a range touches (a damaged chunk fails only the ranges over it, naming the file and its
// bytes), and a file recorded without chunks whole.
#include "hwtrain/io/chunk_checksums.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace hwt {
namespace chunk_checksums_test {

std::string bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) % 251);
  return s;
}

void damage(const fs::path& p, uint64_t at) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  const char c = static_cast<char>(f.get());
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x5a));
}

// A checkpoint of `big` (16000 bytes: chunks of 4096, 4096, 4096, 3712) and `small` (100 bytes).
fs::path checkpoint(const testing::TempDir& tmp) {
  CheckpointStore store(tmp.path() / "ckpts", 3, 4096);
  return store.save(1, [](const fs::path& staging) {
    write_file_atomic(staging / "big", bytes(16000));
    write_file_atomic(staging / "small", bytes(100));
  });
}

const CheckpointFile& listed(const CheckpointManifest& m, const std::string& path) {
  for (const auto& f : m.files) {
    if (f.path == path) return f;
  }
  throw std::runtime_error(path + " is not listed");
}

TEST(ChunkChecksums, EachChunkIsTheChecksumOfItsBytes) {
  testing::TempDir tmp;
  const std::string data = bytes(16000);
  write_file_atomic(tmp.path() / "f", data);
  const FileChecksums sums = file_checksums(tmp.path() / "f", 4096);
  EXPECT_EQ(sums.whole, crc32c(data.data(), data.size()));
  ASSERT_EQ(sums.chunks.size(), 4u);
  for (size_t c = 0; c < 4; ++c) {
    const size_t n = std::min<size_t>(4096, 16000 - 4096 * c);
    EXPECT_EQ(sums.chunks[c], crc32c(data.data() + 4096 * c, n)) << "chunk " << c;
  }
  EXPECT_TRUE(file_checksums(tmp.path() / "f", 0).chunks.empty());
  EXPECT_EQ(file_checksums(tmp.path() / "f", 16000).chunks.size(), 1u);
}

TEST(ChunkChecksums, TheMarkerRecordsTheChunksOfFilesLargerThanOne) {
  testing::TempDir tmp;
  const fs::path ckpt = checkpoint(tmp);
  const CheckpointManifest m = read_checkpoint_manifest(ckpt);
  EXPECT_EQ(listed(m, "big").chunk_bytes, 4096u);
  EXPECT_EQ(listed(m, "big").chunk_crc32c, file_checksums(ckpt / "big", 4096).chunks);
  EXPECT_EQ(listed(m, "small").chunk_bytes, 0u);
  EXPECT_TRUE(listed(m, "small").chunk_crc32c.empty());
  EXPECT_NO_THROW(verify_checkpoint(ckpt));
  // As one hex string, 8 digits a chunk; an older build's list of numbers reads the same.
  nlohmann::json j = nlohmann::json::parse(read_file(ckpt / kCheckpointMarker));
  for (auto& f : j["files"]) {
    if (f["path"] != "big") continue;
    EXPECT_EQ(f["chunk_crc32c_hex"], chunk_checksums_hex(listed(m, "big").chunk_crc32c));
    EXPECT_EQ(f["chunk_crc32c_hex"].get<std::string>().size(), 32u);
    f.erase("chunk_crc32c_hex");
    f["chunk_crc32c"] = listed(m, "big").chunk_crc32c;
  }
  EXPECT_EQ(j["version"], 2);
  j["version"] = 1;  // as an older build wrote it whole
  write_file_atomic(ckpt / kCheckpointMarker, j.dump());
  EXPECT_EQ(listed(read_checkpoint_manifest(ckpt), "big").chunk_crc32c, listed(m, "big").chunk_crc32c);
  EXPECT_THROW(CheckpointStore(tmp.path() / "x", 3, 1024), ConfigError);  // chunks of 4 KiB to 1 GiB
  EXPECT_THROW(CheckpointStore(tmp.path() / "x", 3, uint64_t{1} << 31), ConfigError);
}

TEST(ChunkChecksums, HexFormRoundTripsAndRefusesWhatIsNotHex) {
  const std::vector<uint32_t> sums = {0, 0xdeadbeef, 1, 0xffffffff};
  EXPECT_EQ(chunk_checksums_hex(sums), "00000000deadbeef00000001ffffffff");
  EXPECT_EQ(parse_chunk_checksums_hex(chunk_checksums_hex(sums)), sums);
  EXPECT_EQ(parse_chunk_checksums_hex("DEADBEEF"), std::vector<uint32_t>{0xdeadbeef});
  EXPECT_FALSE(parse_chunk_checksums_hex("deadbee"));
  EXPECT_FALSE(parse_chunk_checksums_hex("deadbeeg"));
  EXPECT_FALSE(parse_chunk_checksums_hex("-eadbeef"));
}

// 1 MiB chunks, doubled until a checkpoint's files of more than one chunk have at most 2^20 of them
// (a marker under 9 MiB of hex): 3 TiB in one file takes 4 MiB chunks (768 Ki of them).
TEST(ChunkChecksums, ChunksGrowOnlyWhereTheMarkerWouldHoldTooMany) {
  constexpr uint64_t kMiB = uint64_t{1} << 20, kTiB = kMiB << 20;
  EXPECT_EQ(marker_chunk_bytes({100, 5 * kMiB, 300 * kMiB}, kMiB), kMiB);
  EXPECT_EQ(marker_chunk_bytes({kTiB}, kMiB), kMiB);          // exactly 2^20 chunks
  EXPECT_EQ(marker_chunk_bytes({kTiB + 1}, kMiB), 2 * kMiB);  // one more
  EXPECT_EQ(marker_chunk_bytes({3 * kTiB}, kMiB), 4 * kMiB);
  EXPECT_EQ(marker_chunk_bytes({kTiB / 2, kTiB / 2, kMiB}, kMiB), kMiB);  // a one-chunk file has none
  EXPECT_EQ(marker_chunk_bytes({4 * kTiB}, 3 * kMiB), 6 * kMiB);  // any start, doubled
  EXPECT_EQ(marker_chunk_bytes({uint64_t{1} << 50}, 3 * kMiB), kMaxChecksumChunkBytes);  // 1 PiB: capped at 1 GiB
  EXPECT_THROW(marker_chunk_bytes({uint64_t{1} << 51}, kMiB), IoError);  // 2 PiB: 2^21 chunks even then
}

TEST(ChunkChecksums, ARangeChecksOnlyTheChunksItTouches) {
  testing::TempDir tmp;
  const fs::path ckpt = checkpoint(tmp);
  const CheckpointFile big = listed(read_checkpoint_manifest(ckpt), "big");
  damage(ckpt / "big", 14400);  // in chunk 3: bytes [12288, 16000)
  RangeVerifier v(ckpt, big);
  EXPECT_NO_THROW(v.check(0, 4800));  // chunks 0 and 1
  EXPECT_NO_THROW(v.check(9600, 12288));
  EXPECT_EQ(v.bytes_checked(), 12288u);
  const std::string what = testing::error_of<IoError>([&] { v.check(11200, 12800); });
  EXPECT_NE(what.find((ckpt / "big").string() + " bytes [12288, 16000)"), std::string::npos) << what;
  EXPECT_NE(what.find("CRC32C"), std::string::npos) << what;
  EXPECT_NE(testing::error_of<IoError>([&] { verify_checkpoint(ckpt); }).find("big"), std::string::npos);
}

TEST(ChunkChecksums, AFileRecordedWithoutChunksIsCheckedWholeOnce) {
  testing::TempDir tmp;
  const fs::path ckpt = checkpoint(tmp);
  CheckpointFile big = listed(read_checkpoint_manifest(ckpt), "big");
  big.chunk_bytes = 0;  // as an older build recorded it
  big.chunk_crc32c.clear();
  RangeVerifier intact(ckpt, big);
  intact.check(0, 10);
  intact.check(8000, 8010);
  EXPECT_EQ(intact.bytes_checked(), 16000u);
  damage(ckpt / "big", 14400);
  RangeVerifier damaged(ckpt, big);
  EXPECT_NE(testing::error_of<IoError>([&] { damaged.check(0, 10); }).find("fails its CRC32C check"), std::string::npos);
}

TEST(ChunkChecksums, MalformedChunkEntriesAreRefusedNamingTheFile) {
  testing::TempDir tmp;
  const fs::path ckpt = checkpoint(tmp);
  const fs::path marker = ckpt / kCheckpointMarker;
  const nlohmann::json good = nlohmann::json::parse(read_file(marker));
  size_t at = 0;
  while (good["files"][at]["path"] != "big") ++at;
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"chunk_bytes", 0}, {"chunk_bytes", -1}, {"chunk_bytes", 1024}, {"chunk_bytes", 1ULL << 31},
      {"chunk_bytes", 8192},  // 8192: 2 chunks, 4 listed
      {"chunk_crc32c_hex", 5}, {"chunk_crc32c_hex", "0000000100000002"},  // not a string; 2 of 4
      {"chunk_crc32c_hex", std::string(31, '0')}, {"chunk_crc32c_hex", std::string(31, '0') + "x"},
      {"chunk_crc32c_hex", std::string(33, '0')},  // not 8 characters a chunk
      {"chunk_crc32c", {1, 2, 3, 4}}};  // a list beside the hex string
  const std::vector<std::pair<std::string, nlohmann::json>> old_form = {  // an older build's list
      {"chunk_crc32c", "none"}, {"chunk_crc32c", {1, 2, 3}}, {"chunk_crc32c", {1, 2, 3, 4294967296ULL}}};
  for (const auto& [key, value] : cases) {
    nlohmann::json j = good;
    j["files"][at][key] = value;
    write_file_atomic(marker, j.dump());
    const std::string what = testing::error_of<IoError>([&] { read_checkpoint_manifest(ckpt); });
    EXPECT_NE(what.find("'big'"), std::string::npos) << key << " = " << value.dump() << ": " << what;
    EXPECT_NE(what.find(marker.string()), std::string::npos) << what;
  }
  for (const auto& [key, value] : old_form) {
    nlohmann::json j = good;
    j["files"][at].erase("chunk_crc32c_hex");
    j["files"][at][key] = value;
    write_file_atomic(marker, j.dump());
    const std::string what = testing::error_of<IoError>([&] { read_checkpoint_manifest(ckpt); });
    EXPECT_NE(what.find("'big'"), std::string::npos) << key << " = " << value.dump() << ": " << what;
    EXPECT_NE(what.find(marker.string()), std::string::npos) << what;
  }
  nlohmann::json j = good;
  j["files"][at].erase("chunk_bytes");  // a list without its size
  write_file_atomic(marker, j.dump());
  EXPECT_NE(testing::error_of<IoError>([&] { read_checkpoint_manifest(ckpt); }).find("chunk_bytes"), std::string::npos);
}

}  // namespace chunk_checksums_test
}  // namespace hwt
