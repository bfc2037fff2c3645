#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>

#include "hwtrain/core/error.h"
#include "hwtrain/data/token_file.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

std::vector<int32_t> ramp(int64_t n, int64_t mod, int64_t start = 0) {
  std::vector<int32_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>((start + i * 7919) % mod);
  return v;
}

void expect_span_eq(const TokenSpan& span, const std::vector<int32_t>& ids) {
  ASSERT_EQ(span.size(), static_cast<int64_t>(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(span[i], ids[i]) << "at " << i;
  std::vector<int64_t> window(ids.size());
  span.copy_window(0, span.size(), window.data());
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(window[i], ids[i]) << "at " << i;
}

void round_trip(int64_t vocab, TokenDtype expected_dtype) {
  TempDir dir;
  fs::path path = dir / "x.hwt";
  auto train = ramp(1000, vocab), val = ramp(77, vocab, 3);
  train.back() = static_cast<int32_t>(vocab - 1);  // the largest id survives
  write_token_file(path, vocab, "byte", 0x1234abcdull, train, val, 12, 3);
  TokenFile f(path);
  EXPECT_EQ(f.dtype(), expected_dtype);
  EXPECT_EQ(f.vocab_size(), vocab);
  EXPECT_EQ(f.tokenizer_name(), "byte");
  EXPECT_EQ(f.fingerprint(), 0x1234abcdull);
  EXPECT_EQ(f.num_train_documents(), 12);
  EXPECT_EQ(f.num_val_documents(), 3);
  EXPECT_EQ(fs::file_size(path), kTokenFileHeaderSize + 1077 * dtype_bytes(expected_dtype));
  expect_span_eq(f.train(), train);
  expect_span_eq(f.val(), val);
  std::vector<int64_t> w(5);
  f.train().copy_window(10, 5, w.data());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(w[i], train[10 + i]);
  EXPECT_THROW(f.train().copy_window(998, 5, w.data()), std::out_of_range);
}

TEST(TokenFile, RoundTripUint16) { round_trip(257, TokenDtype::kUInt16); }
TEST(TokenFile, RoundTripUint16FullRange) { round_trip(65536, TokenDtype::kUInt16); }
TEST(TokenFile, RoundTripUint32) { round_trip(100000, TokenDtype::kUInt32); }

TEST(TokenFile, SpansOutliveTheFile) {
  TempDir dir;
  write_token_file(dir / "x.hwt", 257, "byte", 1, {1, 2, 3}, {4, 5});
  TokenSpan val;
  {
    TokenFile f(dir / "x.hwt");
    val = f.val();
  }
  EXPECT_EQ(val[1], 5);
}

TEST(TokenFileWriter, RejectsIdsOutsideTheVocabulary) {
  TempDir dir;
  EXPECT_THROW(write_token_file(dir / "x.hwt", 257, "byte", 1, {1, 257}, {2}), DataError);
  EXPECT_FALSE(fs::exists(dir / "x.hwt"));
}

TEST(TokenFileWriter, UncommittedWriteLeavesNothingAndKeepsOldFile) {
  TempDir dir;
  fs::path path = dir / "x.hwt";
  write_token_file(path, 257, "byte", 1, {1, 2, 3}, {4});
  {
    TokenFileWriter w(path, 257, "byte", 2);
    std::vector<int32_t> ids(100000, 9);
    w.append(ids);  // more than one buffer: part of it reached the temporary file
  }  // destroyed without commit, as if interrupted by an exception
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
  TokenFile f(path);
  EXPECT_EQ(f.fingerprint(), 1u);
  EXPECT_EQ(f.num_train_tokens(), 3);
}

TEST(TokenFileWriter, AKilledWritersPartialFileGoesWithTheNextWrite) {
  TempDir dir;
  const fs::path path = dir / "x.hwt";
  dir.write(".x.hwt.tmp-4000000-0", std::string(4096, '\0'));  // a killed prepare's (no lock held)
  const fs::path live = dir.write(".x.hwt.tmp-4000001-0", std::string(4096, '\0'));
  const int fd = ::open(live.c_str(), O_RDONLY | O_CLOEXEC);  // a writer still at work holds its lock
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const fs::path other = dir.write(".y.hwt.tmp-4000000-0", "another file's");
  write_token_file(path, 257, "byte", 1, {1, 2, 3}, {4});
  EXPECT_FALSE(fs::exists(dir / ".x.hwt.tmp-4000000-0"));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  ::close(fd);
  EXPECT_EQ(TokenFile(path).num_train_tokens(), 3);
}

std::string expect_data_error(const fs::path& path) {
  try {
    TokenFile f(path);
  } catch (const DataError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "expected DataError for " << path;
  return "";
}

TEST(TokenFile, TruncatedFileIsRejectedWithSizes) {
  TempDir dir;
  fs::path path = dir / "x.hwt";
  write_token_file(path, 257, "byte", 1, ramp(500, 257), ramp(50, 257));
  uint64_t full = fs::file_size(path);
  fs::resize_file(path, full - 3);
  std::string msg = expect_data_error(path);
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(full)), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(full - 3)), std::string::npos) << msg;
  fs::resize_file(path, 100);  // inside the header
  msg = expect_data_error(path);
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

void flip_byte(const fs::path& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  f.read(&c, 1);
  c ^= 0x01;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST(TokenFile, FlippedPayloadByteFailsTheChecksum) {
  TempDir dir;
  fs::path path = dir / "x.hwt";
  write_token_file(path, 257, "byte", 1, ramp(500, 257), ramp(50, 257));
  flip_byte(path, kTokenFileHeaderSize + 601);
  std::string msg = expect_data_error(path);
  EXPECT_NE(msg.find("checksum mismatch in " + path.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("re-run hwtrain prepare"), std::string::npos) << msg;
  EXPECT_NO_THROW(TokenFile(path, /*verify_checksum=*/false));
}

TEST(TokenFile, CorruptHeaderIsRejected) {
  TempDir dir;
  fs::path path = dir / "x.hwt";
  write_token_file(path, 257, "byte", 1, ramp(50, 257), ramp(5, 257));
  flip_byte(path, 64);  // fingerprint: caught by the header checksum
  std::string msg = expect_data_error(path);
  EXPECT_NE(msg.find("header checksum"), std::string::npos) << msg;
  flip_byte(path, 64);
  EXPECT_NO_THROW(TokenFile{path});
  flip_byte(path, 0);  // magic
  msg = expect_data_error(path);
  EXPECT_NE(msg.find("not a hwtrain token file"), std::string::npos) << msg;
}

TEST(TokenFile, EmptyAndMissingFilesAreDataErrors) {
  TempDir dir;
  dir.write("empty.hwt", "");
  expect_data_error(dir / "empty.hwt");
  expect_data_error(dir / "missing.hwt");
}

TEST(TokenFileHeader, EncodeDecodeRoundTrip) {
  TokenFileHeader h;
  h.vocab_size = 70000;
  h.dtype = TokenDtype::kUInt32;
  h.num_train_tokens = 5;
  h.num_val_tokens = 2;
  h.num_train_documents = 4;
  h.num_val_documents = 1;
  h.fingerprint = ~0ull;
  h.payload_crc32c = 0xdeadbeef;
  h.tokenizer_name = "spm:abc";
  std::string bytes = encode_token_file_header(h);
  ASSERT_EQ(bytes.size(), kTokenFileHeaderSize);
  TokenFileHeader d = decode_token_file_header(bytes.data(), bytes.size(), h.expected_file_size(), "mem");
  EXPECT_EQ(d.vocab_size, h.vocab_size);
  EXPECT_EQ(d.dtype, h.dtype);
  EXPECT_EQ(d.num_train_tokens, 5);
  EXPECT_EQ(d.num_val_documents, 1);
  EXPECT_EQ(d.fingerprint, h.fingerprint);
  EXPECT_EQ(d.payload_crc32c, h.payload_crc32c);
  EXPECT_EQ(d.tokenizer_name, "spm:abc");
  EXPECT_THROW(decode_token_file_header(bytes.data(), bytes.size(), h.expected_file_size() + 1, "mem"), DataError);
  h.tokenizer_name = std::string(64, 'x');
  EXPECT_THROW(encode_token_file_header(h), DataError);
}

}  // namespace
}  // namespace hwt
