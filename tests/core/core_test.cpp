#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include "hwtrain/core/crc32c.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

TEST(Crc32c, Rfc3720Vectors) {
  std::string zeros(32, '\0'), ones(32, '\xff'), ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62a8ab43u);
  EXPECT_EQ(crc32c(ascending.data(), ascending.size()), 0x46dd794eu);
  // Extending in pieces gives the same value as one call.
  uint32_t c = crc32c_extend(0, ascending.data(), 5);
  c = crc32c_extend(c, ascending.data() + 5, 27);
  EXPECT_EQ(c, 0x46dd794eu);
}

TEST(Strings, DidYouMean) {
  EXPECT_EQ(closest_match("max_step", {"max_steps", "seed"}), "max_steps");
  EXPECT_EQ(closest_match("zzzzzz", {"max_steps", "seed"}), "");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_seconds(1.234), "1.23 s");
  EXPECT_EQ(format_seconds(0.004567), "4.57 ms");
  EXPECT_EQ(format_seconds(0.000789), "789 us");
  EXPECT_EQ(format_seconds(0), "0 s");
}

TEST(Files, AtomicWriteReplacesContentAndLeavesNoTemp) {
  testing::TempDir dir;
  auto p = dir / "a.txt";
  write_file_atomic(p, "one");
  write_file_atomic(p, "two");
  EXPECT_EQ(read_file(p), "two");
  int n = 0;
  for (auto& e : fs::directory_iterator(dir.path())) { (void)e; ++n; }
  EXPECT_EQ(n, 1);
}

TEST(Files, UnwritableDirectoryIsReported) {
  if (geteuid() == 0) GTEST_SKIP() << "root can write anywhere";
  testing::TempDir dir;
  fs::create_directories(dir / "ro");
  chmod((dir / "ro").c_str(), 0500);
  EXPECT_THROW(ensure_writable_dir(dir / "ro"), IoError);
}

TEST(Files, UncreatableDirectoryIsReported) {
  testing::TempDir dir;
  write_file_atomic(dir / "file", "x");
  try {
    ensure_writable_dir(dir / "file" / "sub");
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("file/sub"), std::string::npos);
  }
  EXPECT_THROW(read_file(dir / "nope"), IoError);
  try {  // a directory opens as an empty stream: refused, not read as ""
    read_file(dir.path());
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}


// The error read_regular_file throws for `path`, or "" when it reads it.
std::string regular_file_error(const fs::path& path, uint64_t max_bytes) {
  try {
    read_regular_file(path, max_bytes);
    return "";
  } catch (const IoError& e) {
    return e.what();
  }
}

TEST(Files, ReadRegularFileRefusesFifosDevicesLinksAndOversizedFiles) {
  testing::TempDir dir;
  const fs::path plain = dir.write("plain.txt", "0123456789");
  EXPECT_EQ(read_regular_file(plain, 10), "0123456789");
  // Bounded before reading: one byte over the limit is refused, naming the file and both sizes.
  const std::string big = regular_file_error(plain, 9);
  EXPECT_NE(big.find(plain.string()), std::string::npos) << big;
  EXPECT_NE(big.find("10 bytes"), std::string::npos) << big;
  // A FIFO with no writer would block a plain open for reading forever; it is refused at once.
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string fifo_error = regular_file_error(fifo, 1 << 20);
  EXPECT_NE(fifo_error.find("FIFO"), std::string::npos) << fifo_error;
  EXPECT_NE(fifo_error.find(fifo.string()), std::string::npos) << fifo_error;
  EXPECT_NE(regular_file_error("/dev/zero", 1 << 20).find("device"), std::string::npos);
  fs::create_symlink(plain, dir / "link");
  EXPECT_NE(regular_file_error(dir / "link", 1 << 20).find("symbolic link"), std::string::npos);
  EXPECT_NE(regular_file_error(dir.path(), 1 << 20).find("directory"), std::string::npos);
  EXPECT_THROW(read_regular_file(dir / "missing", 10), IoError);
}

TEST(Files, PathInsideDirIsRelativeWithoutDotComponents) {
  for (const char* ok : {"tokenizer.model", "sub/file.bin", "a.b", ".hidden"}) EXPECT_TRUE(is_path_inside_dir(ok)) << ok;
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a/..", ".", "./x", "a//b", "a/", "/dev/zero"}) {
    EXPECT_FALSE(is_path_inside_dir(bad)) << bad;
  }
  EXPECT_FALSE(is_path_inside_dir(std::string("a\0/../../x", 10)));
}

}  // namespace
}  // namespace hwt

namespace hwt {
namespace {

TEST(Files, TimestampedPathNeverNamesAnExistingDirectory) {
  testing::TempDir dir;
  const fs::path first = timestamped_path(dir.path(), "run-");
  EXPECT_EQ(first.parent_path(), dir.path());
  EXPECT_EQ(first.filename().string().rfind("run-", 0), 0u);
  EXPECT_EQ(first.filename().string().size(), std::string("run-YYYYmmdd-HHMMSS").size());
  fs::create_directories(first);
  const fs::path second = timestamped_path(dir.path(), "run-");  // same second, or a later one
  EXPECT_NE(second, first);
  EXPECT_FALSE(fs::exists(second));
}

}  // namespace
}  // namespace hwt
