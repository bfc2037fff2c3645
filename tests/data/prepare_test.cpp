#include <gtest/gtest.h>
#include <unistd.h>

#include "hwtrain/core/error.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/token_file.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

std::string tokens_to_string(const TokenSpan& span) {
  std::string s;
  for (int64_t i = 0; i < span.size(); ++i) s.push_back(span[i] == 256 ? '|' : static_cast<char>(span[i]));
  return s;
}

// Documents of a split, split at end-of-text.
std::vector<std::string> documents(const TokenSpan& span) {
  std::vector<std::string> docs(1);
  for (int64_t i = 0; i < span.size(); ++i) {
    if (span[i] == 256) {
      docs.emplace_back();
    } else {
      docs.back().push_back(static_cast<char>(span[i]));
    }
  }
  return docs;
}

std::string expect_prepare_error(const std::vector<fs::path>& inputs, const fs::path& out, const std::string& needle,
                                 PrepareOptions opts = {}) {
  try {
    prepare_token_file(inputs, out, opts);
  } catch (const DataError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    EXPECT_FALSE(fs::exists(out));
    return msg;
  }
  ADD_FAILURE() << "expected DataError containing '" << needle << "'";
  return "";
}

TEST(SplitDocuments, SeparatorLinesAndBlankDocuments) {
  std::vector<DocumentPiece> pieces;
  split_documents("%\nfirst\nline\n%\n  \n%\r\nsecond\n%\nthird", "%", 0, pieces);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].text, "first\nline\n");
  EXPECT_EQ(pieces[1].text, "second\n");
  EXPECT_EQ(pieces[2].text, "third");
  pieces.clear();
  split_documents("a\n%%\nb\n", "%", 0, pieces);  // "%%" is not the separator
  ASSERT_EQ(pieces.size(), 1u);
  pieces.clear();
  split_documents("whole\n%\nfile", "", 0, pieces);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].text, "whole\n%\nfile");
}

TEST(SplitDocuments, LongDocumentsAreCutIntoPieces) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line number " + std::to_string(i) + "\n";
  std::vector<DocumentPiece> pieces;
  split_documents(text, "", 200, pieces);
  ASSERT_GT(pieces.size(), 5u);
  std::string joined;
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].continues, i > 0);
    if (i + 1 < pieces.size()) {
      EXPECT_EQ(pieces[i].text.back(), '\n');  // cut at line ends
    }
    joined += std::string(pieces[i].text);
  }
  EXPECT_EQ(joined, text);
  pieces.clear();
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xE2\x82\xAC";  // one long line of 3-byte characters
  split_documents(euros, "", 64, pieces);
  ASSERT_GT(pieces.size(), 1u);
  for (const auto& p : pieces) EXPECT_EQ(p.text.size() % 3, 0u) << "cut inside a character";
}

// fortune's indexes ("b.dat" beside "b") are skipped, other .dat files are read.
TEST(Prepare, DirectoryWithSubdirsSkipsFortuneIndexesHiddenAndDuplicateLinks) {
  TempDir dir;
  dir.write("corpus/a.txt", "alpha\n%\nbeta\n");
  dir.write("corpus/sub/b", "gamma\n%\n%\ndelta\n");
  dir.write("corpus/sub/deeper/c", "epsilon\n");
  dir.write("corpus/sub/b.dat", "SHOULD NOT APPEAR");
  dir.write("corpus/readings.dat", "zeta\n");
  dir.write("corpus/.hidden", "SHOULD NOT APPEAR");
  dir.write("corpus/.git/config", "SHOULD NOT APPEAR");
  fs::create_symlink("a.txt", dir / "corpus/a.u8");  // as fortunes' .u8 links
  PrepareOptions opts;
  opts.document_separator = "%";
  opts.val_fraction = 0.3;
  PrepareStats stats = prepare_token_file({dir / "corpus"}, dir / "out.hwt", opts);
  EXPECT_EQ(stats.num_files, 4);
  EXPECT_EQ(stats.num_documents, 6);
  EXPECT_EQ(stats.num_skipped_files, 4);
  TokenFile f(dir / "out.hwt");
  EXPECT_EQ(f.num_train_documents() + f.num_val_documents(), 6);
  EXPECT_GE(f.num_val_documents(), 1);
  EXPECT_EQ(f.num_train_tokens(), stats.num_train_tokens);
  std::string all = tokens_to_string(f.train()) + "|" + tokens_to_string(f.val());
  EXPECT_EQ(all.find("SHOULD"), std::string::npos);
  for (const char* word : {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}) {
    EXPECT_NE(all.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(all.find("alpha\nbeta"), std::string::npos) << "the separator line must split documents";
  EXPECT_EQ(all.find('%'), std::string::npos);
  // Documents in each split are separated by end-of-text: 6 documents, 4 separators in total.
  EXPECT_EQ(documents(f.train()).size() + documents(f.val()).size(), 6u);
}

TEST(Prepare, SplitIsDeterministicPerSeed) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "document " + std::to_string(i) + "\n%\n";
  dir.write("c.txt", text);
  PrepareOptions opts;
  opts.document_separator = "%";
  opts.val_fraction = 0.2;
  prepare_token_file({dir / "c.txt"}, dir / "a.hwt", opts);
  prepare_token_file({dir / "c.txt"}, dir / "b.hwt", opts);
  opts.split_seed = 7;
  prepare_token_file({dir / "c.txt"}, dir / "c.hwt", opts);
  TokenFile a(dir / "a.hwt"), b(dir / "b.hwt"), c(dir / "c.hwt");
  auto val_a = documents(a.val()), val_b = documents(b.val()), val_c = documents(c.val());
  EXPECT_EQ(val_a, val_b);
  EXPECT_EQ(fs::file_size(dir / "a.hwt"), fs::file_size(dir / "b.hwt"));
  EXPECT_NE(val_a, val_c);
  EXPECT_NE(a.fingerprint(), c.fingerprint());
  EXPECT_GT(val_a.size(), 20u);  // about 40 of 200
  EXPECT_LT(val_a.size(), 65u);
  EXPECT_EQ(documents(a.train()).size() + val_a.size(), 200u);
}

TEST(Prepare, SmallCorpusStillGetsAValidationDocument) {
  TempDir dir;
  dir.write("c.txt", "one\n%\ntwo\n%\nthree\n");
  PrepareOptions opts;
  opts.document_separator = "%";
  opts.val_fraction = 1e-9;  // practically never chosen: the last document moves to validation
  prepare_token_file({dir / "c.txt"}, dir / "out.hwt", opts);
  TokenFile f(dir / "out.hwt");
  EXPECT_EQ(tokens_to_string(f.train()), "one\n|two\n");
  EXPECT_EQ(tokens_to_string(f.val()), "three\n");
}

TEST(Prepare, OneLargeFileIsCutIntoPiecesForTheSplit) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "To be or not to be, line " + std::to_string(i) + "\n";
  dir.write("play.txt", text);
  PrepareOptions opts;
  opts.max_document_bytes = 4096;
  opts.val_fraction = 0.2;
  PrepareStats stats = prepare_token_file({dir / "play.txt"}, dir / "out.hwt", opts);
  EXPECT_GT(stats.num_documents, 10);
  TokenFile f(dir / "out.hwt");
  EXPECT_GT(f.num_val_tokens(), 0);
  // Adjacent pieces of one document in one split are joined without end-of-text.
  EXPECT_EQ(f.num_train_tokens() + f.num_val_tokens(),
            static_cast<int64_t>(text.size()) + (documents(f.train()).size() - 1) + (documents(f.val()).size() - 1));
  EXPECT_LT(documents(f.train()).size(), static_cast<size_t>(f.num_train_documents()));
}

TEST(Prepare, BadInputsAreOneLineErrorsNamingThePath) {
  TempDir dir;
  fs::path out = dir / "out.hwt";
  expect_prepare_error({dir / "missing"}, out, (dir / "missing").string() + " does not exist");
  dir.write("empty.txt", "");
  expect_prepare_error({dir / "empty.txt"}, out, "is empty");
  dir.write("blank.txt", " \n\n");
  expect_prepare_error({dir / "blank.txt"}, out, "is empty");
  fs::create_directories(dir / "emptydir");
  expect_prepare_error({dir / "emptydir"}, out, (dir / "emptydir").string() + " contains no text files");
  dir.write("bin/a.bin", std::string("\x7f" "ELF\0\0\0", 7));
  dir.write("bin/b.bin", std::string("x\0y", 3));
  expect_prepare_error({dir / "bin"}, out, (dir / "bin").string() + " contains no text files");
  expect_prepare_error({dir / "bin/b.bin"}, out, (dir / "bin/b.bin").string() + " is not text");
  dir.write("one.txt", "a single document\n");
  expect_prepare_error({dir / "one.txt"}, out, "too small to split");
}

TEST(Prepare, BinaryFilesInsideADirectoryAreSkipped) {
  TempDir dir;
  dir.write("c/a.txt", "hello\n%\nworld\n");
  dir.write("c/b.bin", std::string("\0\1\2", 3));
  PrepareOptions opts;
  opts.document_separator = "%";
  PrepareStats stats = prepare_token_file({dir / "c"}, dir / "out.hwt", opts);
  EXPECT_EQ(stats.num_files, 1);
  EXPECT_EQ(stats.num_skipped_files, 1);
}

TEST(Prepare, FileThatFailsToReadIsADataError) {
  // /proc/self/mem is a regular file whose read at offset 0 fails with EIO, even for root.
  if (!fs::exists("/proc/self/mem")) GTEST_SKIP() << "no /proc";
  TempDir dir;
  expect_prepare_error({"/proc/self/mem"}, dir / "out.hwt", "cannot read corpus file /proc/self/mem");
}

TEST(Prepare, UnreadableFileIsADataError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  TempDir dir;
  fs::path p = dir.write("secret.txt", "a\n%\nb\n");
  fs::permissions(p, fs::perms::none);
  expect_prepare_error({p}, dir / "out.hwt", "cannot read corpus file " + p.string());
}

TEST(Prepare, FailureLeavesAnExistingOutputUntouched) {
  TempDir dir;
  dir.write("good.txt", "a\n%\nb\n%\nc\n");
  PrepareOptions opts;
  opts.document_separator = "%";
  prepare_token_file({dir / "good.txt"}, dir / "out.hwt", opts);
  uint64_t size = fs::file_size(dir / "out.hwt");
  dir.write("bad.txt", "");
  EXPECT_THROW(prepare_token_file({dir / "bad.txt"}, dir / "out.hwt", opts), DataError);
  EXPECT_EQ(fs::file_size(dir / "out.hwt"), size);
  EXPECT_NO_THROW(TokenFile(dir / "out.hwt"));
}

TEST(PrepareOptions, OutOfRangeValuesNameTheKey) {
  TempDir dir;
  dir.write("c.txt", "a\n%\nb\n");
  PrepareOptions opts;
  opts.val_fraction = 1.0;
  try {
    prepare_token_file({dir / "c.txt"}, dir / "out.hwt", opts);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.val_fraction"), std::string::npos);
  }
  opts.val_fraction = 0.1;
  opts.tokenizer = "nope";
  EXPECT_THROW(prepare_token_file({dir / "c.txt"}, dir / "out.hwt", opts), ConfigError);
  opts.tokenizer = "byte";
  opts.num_threads = int64_t{1} << 32;  // once cast to int, 0: "one per core"
  try {
    prepare_token_file({dir / "c.txt"}, dir / "out.hwt", opts);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--threads = 4294967296 is out of range; valid: 1 .. 1024"),
              std::string::npos) << e.what();
  }
}

TEST(CorpusFingerprint, ChangesWithSourceAndOptions) {
  TempDir dir;
  fs::path p = dir.write("c/a.txt", "hello");
  PrepareOptions opts;
  uint64_t base = corpus_fingerprint(list_corpus_files({dir / "c"}), opts, "byte");
  EXPECT_EQ(base, corpus_fingerprint(list_corpus_files({dir / "c"}), opts, "byte"));
  EXPECT_NE(base, corpus_fingerprint(list_corpus_files({dir / "c"}), opts, "other"));
  PrepareOptions seed = opts;
  seed.split_seed += 1;
  EXPECT_NE(base, corpus_fingerprint(list_corpus_files({dir / "c"}), seed, "byte"));
  PrepareOptions sep = opts;
  sep.document_separator = "%";
  EXPECT_NE(base, corpus_fingerprint(list_corpus_files({dir / "c"}), sep, "byte"));
  fs::last_write_time(p, fs::last_write_time(p) + std::chrono::seconds(5));
  EXPECT_NE(base, corpus_fingerprint(list_corpus_files({dir / "c"}), opts, "byte"));
}

}  // namespace
}  // namespace hwt
