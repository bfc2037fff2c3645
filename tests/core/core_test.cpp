#include <gtest/gtest.h>

#include <sys/stat.h>

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
}

}  // namespace
}  // namespace hwt
