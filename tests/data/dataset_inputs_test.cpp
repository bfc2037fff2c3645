// What prepare and train --data make of inputs that are not plain text: a dataset prepare wrote is
// refused as a corpus (its shards were skipped as binary and its JSON read as text), its
// manifest.json given as data.path names the dataset, binary files in a directory are counted and
// said, and the data cache follows HWTRAIN_CACHE as the other caches do.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "hwtrain/core/error.h"
#include "hwtrain/data/default_corpus.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/sharded_dataset.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

PrepareOptions quiet() {
  PrepareOptions o;
  o.document_separator = "%";
  o.val_fraction = 0.25;
  o.progress = false;
  return o;
}

TEST(DatasetInputs, APreparedDatasetIsNotACorpusAndItsManifestNamesIt) {
  TempDir dir;
  dir.write("corpus/a.txt", "first\n%\nsecond\n%\nthird\n%\nfourth\n");
  prepare({dir / "corpus"}, dir / "ds", quiet());
  ASSERT_TRUE(fs::exists(dir / "ds" / "manifest.json"));
  try {
    prepare({dir / "ds"}, dir / "again.hwt", quiet());
    FAIL() << "a dataset directory was prepared as text";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("is a dataset hwtrain prepare wrote"), std::string::npos) << e.what();
  }
  // A text corpus may hold a manifest.json of its own (a web project): it is read as text.
  dir.write("site/manifest.json", "{\"name\": \"app\"}\n%\n{\"icons\": []}\n%\nmore text\n%\nand more\n");
  EXPECT_NO_THROW(prepare({dir / "site"}, dir / "site.hwt", quiet()));

  DataConfig cfg;
  cfg.path = (dir / "ds" / "manifest.json").string();
  cfg.cache_dir = (dir / "cache").string();
  EXPECT_EQ(resolve_dataset(cfg), dir / "ds");
  EXPECT_FALSE(fs::exists(dir / "cache"));  // nothing prepared from the JSON

  // train --data takes the text directory with its own manifest.json for text, as prepare does.
  cfg.path = (dir / "site").string();
  cfg.document_separator = "%";
  cfg.val_fraction = 0.25;
  EXPECT_FALSE(is_dataset_dir(dir / "site"));
  EXPECT_NE(resolve_dataset(cfg), dir / "site");
  EXPECT_EQ(resolve_dataset(cfg).extension(), ".hwt");
  // A dataset whose manifest is damaged stays a dataset, and reading it names the manifest.
  dir.write("ds/manifest.json", "{\"format\": \"hwtrain-dat");
  EXPECT_TRUE(is_dataset_dir(dir / "ds"));
  cfg.path = (dir / "ds").string();
  try {
    resolve_dataset(cfg);
    FAIL() << "a damaged manifest was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
  }
}

TEST(DatasetInputs, BinaryFilesInADirectoryAreCountedAndSaid) {
  TempDir dir;
  dir.write("mixed/a.txt", "first\n%\nsecond\n%\nthird\n%\nfourth\n");
  dir.write("mixed/b.txt.gz", std::string("\x1f\x8b\x08\0\0\0\0\0", 8) + "compressed");
  const PrepareStats s = prepare({dir / "mixed"}, dir / "m.hwt", quiet());
  EXPECT_EQ(s.num_files, 1);
  EXPECT_EQ(s.num_skipped_files, 1);
  EXPECT_NE(describe(s).find("1 files skipped (hidden, binary or not regular)"), std::string::npos) << describe(s);
}

// A cut under 4 bytes could split a UTF-8 character, then blame the file for invalid UTF-8.
TEST(DatasetInputs, AMaximumDocumentSizeHoldsAUtf8Character) {
  DataConfig cfg;
  cfg.max_document_bytes = 2;
  EXPECT_THROW(cfg.validate(), ConfigError);
  cfg.max_document_bytes = 4;
  EXPECT_NO_THROW(cfg.validate());
  TempDir dir;
  dir.write("utf.txt", "caf\xC3\xA9 na\xC3\xAFve \xE6\x9D\xB1\xE4\xBA\xAC\n");
  PrepareOptions o = quiet();
  o.max_document_bytes = 2;
  EXPECT_THROW(prepare({dir / "utf.txt"}, dir / "u.hwt", o), ConfigError);
}

TEST(DatasetInputs, TheDataCacheFollowsHwtrainCache) {
  const char* old = std::getenv("HWTRAIN_CACHE");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("HWTRAIN_CACHE", "/somewhere/cache", 1);
  EXPECT_EQ(data_cache_dir(DataConfig{}), fs::path("/somewhere/cache/data"));
  DataConfig own;
  own.cache_dir = "mine";
  EXPECT_EQ(data_cache_dir(own), fs::path("mine"));
  saved ? ::setenv("HWTRAIN_CACHE", saved->c_str(), 1) : ::unsetenv("HWTRAIN_CACHE");
}

}  // namespace
}  // namespace hwt
