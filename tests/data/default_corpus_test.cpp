#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/data/default_corpus.h"
#include "hwtrain/data/token_file.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

std::vector<fs::path> hwt_files(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".hwt") out.push_back(e.path());
  }
  return out;
}

TEST(ResolveDataset, TextCorpusIsPreparedOnceThenReusedAndRebuiltOnChange) {
  TempDir dir;
  fs::path a = dir.write("corpus/a.txt", "first\n%\nsecond\n%\nthird\n");
  dir.write("corpus/b.txt", "fourth\n%\nfifth\n");
  DataConfig cfg;
  cfg.path = (dir / "corpus").string();
  cfg.cache_dir = (dir / "cache").string();
  cfg.document_separator = "%";

  fs::path first = resolve_dataset(cfg);
  EXPECT_EQ(first.parent_path(), dir / "cache");
  EXPECT_EQ(first.filename().string().rfind("corpus-", 0), 0u) << first;
  EXPECT_EQ(first.extension(), ".hwt");
  auto mtime = fs::last_write_time(first);
  TokenFile f(first);
  EXPECT_EQ(f.num_train_documents() + f.num_val_documents(), 5);

  fs::path second = resolve_dataset(cfg);  // reused: same file, not rewritten
  EXPECT_EQ(second, first);
  EXPECT_EQ(fs::last_write_time(second), mtime);
  EXPECT_EQ(hwt_files(dir / "cache").size(), 1u);

  // Touching a source file (new mtime, same content) gives a new fingerprint and a rebuild.
  fs::last_write_time(a, fs::last_write_time(a) + std::chrono::seconds(10));
  fs::path third = resolve_dataset(cfg);
  EXPECT_NE(third, first);
  EXPECT_EQ(hwt_files(dir / "cache").size(), 2u);
  EXPECT_NE(TokenFile(third).fingerprint(), f.fingerprint());

  // A corrupt cached file is rebuilt rather than trusted.
  fs::resize_file(third, fs::file_size(third) - 1);
  fs::path fourth = resolve_dataset(cfg);
  EXPECT_EQ(fourth, third);
  EXPECT_NO_THROW(TokenFile{fourth});
}

TEST(ResolveDataset, TokenFileIsUsedAsIs) {
  TempDir dir;
  fs::path p = dir / "ready.hwt";
  write_token_file(p, 257, "byte", 9, {1, 2, 3}, {4});
  DataConfig cfg;
  cfg.path = p.string();
  cfg.cache_dir = (dir / "cache").string();
  EXPECT_EQ(resolve_dataset(cfg), p);
  EXPECT_FALSE(fs::exists(dir / "cache"));
  write_token_file(p, 300, "other", 9, {1, 2, 3}, {4});
  EXPECT_THROW(resolve_dataset(cfg), DataError);  // tokenizer differs from data.tokenizer
}

TEST(ResolveDataset, MissingPathsAreDataErrors) {
  TempDir dir;
  DataConfig cfg;
  cfg.cache_dir = (dir / "cache").string();
  cfg.path = (dir / "nope.txt").string();
  EXPECT_THROW(resolve_dataset(cfg), DataError);
  cfg.path = "";
  try {
    resolve_dataset(cfg, dir / "no-fortunes-here");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("apt-get install fortunes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no-fortunes-here"), std::string::npos) << msg;
  }
}

TEST(ResolveDataset, DefaultCorpusLayoutIsPreparedWithPercentSeparators) {
  // A miniature of /usr/share/games/fortunes: text files, .dat indexes and .u8 links.
  TempDir dir;
  dir.write("fortunes/wisdom", "A penny saved.\n%\nLook before you leap.\n%\nHaste makes waste.\n");
  dir.write("fortunes/wisdom.dat", std::string("\0\0\0\2\0\0\0\3", 8));
  fs::create_symlink("wisdom", dir / "fortunes/wisdom.u8");
  dir.write("fortunes/songs", "La la la.\n%\nTra la.\n");
  DataConfig cfg;
  cfg.cache_dir = (dir / "cache").string();
  fs::path p = resolve_dataset(cfg, dir / "fortunes");
  EXPECT_EQ(p.filename().string().rfind("fortunes-", 0), 0u) << p;
  TokenFile f(p);
  EXPECT_EQ(f.num_train_documents() + f.num_val_documents(), 5);
}

TEST(ResolveDataset, InstalledFortunesPrepare) {
  if (!fs::is_directory(kDefaultCorpusDir)) GTEST_SKIP() << "fortunes package not installed";
  TempDir dir;
  DataConfig cfg;
  cfg.cache_dir = (dir / "cache").string();
  TokenFile f(resolve_dataset(cfg));
  EXPECT_GT(f.num_train_documents(), 1000);
  EXPECT_GT(f.num_val_documents(), 50);
  EXPECT_GT(f.num_train_tokens(), 1000000);
}

}  // namespace
}  // namespace hwt
