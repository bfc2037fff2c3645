// prepare's inputs: JSONL, standard input, include/exclude globs, streaming reads, invalid UTF-8.
#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "data_test_util.h"
#include "hwtrain/core/error.h"
#include "hwtrain/data/corpus_reader.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/sharded_dataset.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

PrepareOptions opts_for_tests() {
  PrepareOptions o;
  o.val_fraction = 0.3;
  o.progress = false;
  return o;
}

std::vector<std::string> documents_of(const ShardedDataset& ds) {
  std::vector<std::string> docs;
  for (Split s : {Split::kTrain, Split::kVal}) {
    std::string text = testing::byte_text(ds.split(s));
    size_t start = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      if (i == text.size() || text[i] == '|') {
        docs.push_back(text.substr(start, i - start));
        start = i + 1;
      }
    }
  }
  std::sort(docs.begin(), docs.end());
  return docs;
}

TEST(PrepareJsonl, RecordsAreDocumentsAndBadLinesAreCounted) {
  TempDir dir;
  dir.write("c.jsonl",
            "{\"text\": \"alpha one\", \"id\": 1}\n"
            "\n"
            "{\"text\": \"beta \\u00e9 two\"}\r\n"
            "not json at all\n"
            "{\"body\": \"no text field\"}\n"
            "[1, 2]\n"
            "{\"text\": 42}\n"
            "{\"text\": \"gamma three\"}");  // last line without newline
  PrepareOptions o = opts_for_tests();
  PrepareStats st = prepare({dir / "c.jsonl"}, dir / "ds", o);
  EXPECT_EQ(st.num_documents, 3);
  EXPECT_EQ(st.num_bad_lines, 4);
  EXPECT_EQ(st.first_bad_line, (dir / "c.jsonl").string() + ":4: not valid JSON");
  EXPECT_EQ(documents_of(ShardedDataset(dir / "ds")),
            (std::vector<std::string>{"alpha one", "beta \xC3\xA9 two", "gamma three"}));
}

TEST(PrepareJsonl, StrictNamesFileAndLineAndOtherFieldsWork) {
  TempDir dir;
  dir.write("c.jsonl", "{\"text\": \"one\"}\n{\"text\": \"two\"}\n{\"content\": \"three\"}\n");
  PrepareOptions o = opts_for_tests();
  o.strict = true;
  testing::expect_data_error([&] { prepare({dir / "c.jsonl"}, dir / "ds", o); },
                             {(dir / "c.jsonl").string() + ":3: no string field 'text'", "--strict"});
  EXPECT_FALSE(fs::exists(dir / "ds" / "manifest.json"));
  o.jsonl_field = "content";
  o.strict = false;
  dir.write("d.jsonl", "{\"content\": \"x one\"}\n{\"content\": \"x two\"}\n");
  PrepareStats st = prepare({dir / "d.jsonl"}, dir / "ds", o);
  EXPECT_EQ(st.num_documents, 2);
  // A .txt file is text unless --format jsonl says otherwise.
  dir.write("e.txt", "{\"text\": \"as json\"}\n{\"text\": \"second\"}\n");
  o.jsonl_field = "text";
  o.format = InputFormat::kJsonl;
  EXPECT_EQ(documents_of(ShardedDataset(prepare({dir / "e.txt"}, dir / "e", o).output)),
            (std::vector<std::string>{"as json", "second"}));
}

TEST(PrepareJsonl, OnlyBadLinesIsAnEmptyCorpus) {
  TempDir dir;
  dir.write("c.jsonl", "nope\n{\"a\": 1}\n");
  testing::expect_data_error([&] { prepare({dir / "c.jsonl"}, dir / "ds", opts_for_tests()); },
                             {"is empty", "2 JSONL lines skipped", ":1: not valid JSON"});
}

// Feeds `text` to this process's standard input through a pipe while `f` runs.
template <class F>
void with_stdin(const std::string& text, F&& f) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  int saved = ::dup(STDIN_FILENO);
  ::dup2(fds[0], STDIN_FILENO);
  ::close(fds[0]);
  std::thread writer([&] {
    size_t off = 0;
    while (off < text.size()) {
      ssize_t w = ::write(fds[1], text.data() + off, text.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    ::close(fds[1]);
  });
  try {
    f();
  } catch (...) {
    writer.join();
    ::dup2(saved, STDIN_FILENO);
    ::close(saved);
    throw;
  }
  writer.join();
  ::dup2(saved, STDIN_FILENO);
  ::close(saved);
}

TEST(PrepareStdin, DashReadsStandardInputAsTextOrJsonl) {
  TempDir dir;
  const std::string text = testing::generated_corpus(120);
  fs::path file = dir.write("c.txt", text);
  PrepareOptions o = opts_for_tests();
  o.document_separator = "%";
  PrepareStats from_stdin;
  with_stdin(text, [&] { from_stdin = prepare({"-"}, dir / "stdin", o); });
  prepare({file}, dir / "file", o);
  ShardedDataset a(dir / "stdin"), b(dir / "file");
  EXPECT_EQ(testing::to_vector(a.train()), testing::to_vector(b.train()));
  EXPECT_EQ(testing::to_vector(a.val()), testing::to_vector(b.val()));
  EXPECT_EQ(from_stdin.num_bytes, static_cast<int64_t>(text.size()));
  EXPECT_EQ(a.manifest()->sources[0]["path"], "-");
  // The fingerprint follows the bytes read: other input, other fingerprint.
  PrepareStats other;
  with_stdin(text + "more\n", [&] { other = prepare({"-"}, dir / "stdin2", o); });
  EXPECT_NE(other.fingerprint, from_stdin.fingerprint);
  o.format = InputFormat::kJsonl;
  PrepareStats jsonl;
  with_stdin("{\"text\": \"one\"}\n{\"text\": \"two\"}\n", [&] { jsonl = prepare({"-"}, dir / "j", o); });
  EXPECT_EQ(jsonl.num_documents, 2);
  o.format = InputFormat::kAuto;
  testing::expect_data_error([&] { with_stdin("", [&] { prepare({"-"}, dir / "empty", o); }); }, {"<stdin> is empty"});
}

TEST(PrepareGlobs, IncludeAndExcludeChooseFilesInDirectories) {
  TempDir dir;
  dir.write("c/a.txt", "alpha text\n");
  dir.write("c/b.md", "beta markdown\n");
  dir.write("c/sub/c.txt", "gamma text\n");
  dir.write("c/sub/skip.txt", "delta skipped\n");
  dir.write("c/d.jsonl", "{\"text\": \"epsilon json\"}\n");
  PrepareOptions o = opts_for_tests();
  o.include = {"*.txt", "*.jsonl"};
  o.exclude = {"sub/skip.*"};
  PrepareStats st = prepare({dir / "c"}, dir / "ds", o);
  EXPECT_EQ(st.num_files, 3);
  EXPECT_EQ(st.num_filtered_files, 2);
  EXPECT_EQ(documents_of(ShardedDataset(dir / "ds")),
            (std::vector<std::string>{"alpha text\n", "epsilon json", "gamma text\n"}));
  o.include = {"*.rst"};
  testing::expect_data_error([&] { prepare({dir / "c"}, dir / "ds2", o); },
                             {(dir / "c").string() + " contains no text files", "5 left out by --include/--exclude"});
}

// The streaming reader cuts exactly as split_documents does on the whole text, for any read size.
TEST(CorpusReader, StreamingCutsEqualWholeFileCuts) {
  TempDir dir;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    std::string text;
    int lines = 1 + static_cast<int>(rng() % 60);
    for (int l = 0; l < lines; ++l) {
      switch (rng() % 7) {
        case 0: text += "%\n"; break;
        case 1: text += "  \n"; break;
        case 2: text += "%\r\n"; break;
        case 3: {  // long lines full of '%': cuts inside lines must not create separator lines
          size_t n = rng() % 120;
          for (size_t k = 0; k < n; ++k) text.push_back("a%% "[rng() % 4]);
          text += "\n";
          break;
        }
        default: text += std::string(rng() % 40, static_cast<char>('a' + rng() % 26)) + "\xC3\xA9\n";
      }
    }
    if (rng() % 2) text += "tail without newline";
    fs::path file = dir.write("t" + std::to_string(trial) + ".txt", text);
    for (std::string sep : {"%", ""}) {
      for (int64_t max : {int64_t{0}, int64_t{16}, int64_t{50}}) {
        std::vector<DocumentPiece> whole;
        split_documents(text, sep, max, whole);
        PrepareOptions o;
        o.document_separator = sep;
        o.max_document_bytes = max;
        CorpusReader reader(list_corpus_files({file}), o, 1 + rng() % 23);
        CorpusChunk chunk;
        std::vector<std::pair<std::string, bool>> streamed;
        while (reader.next(chunk)) {
          for (size_t i = 0; i < chunk.pieces.size(); ++i) {
            ASSERT_FALSE(chunk.pieces[i].fragment);
            streamed.emplace_back(std::string(chunk.piece_text(i)), chunk.pieces[i].continues);
          }
        }
        ASSERT_EQ(streamed.size(), whole.size()) << "trial " << trial << " sep '" << sep << "' max " << max;
        for (size_t i = 0; i < whole.size(); ++i) {
          EXPECT_EQ(streamed[i].first, std::string(whole[i].text)) << "trial " << trial << " piece " << i;
          EXPECT_EQ(streamed[i].second, whole[i].continues) << "trial " << trial << " piece " << i;
        }
      }
    }
  }
}

TEST(PrepareBytes, InvalidUtf8IsKeptAsBytesByTheByteTokenizer) {
  TempDir dir;
  const std::string odd = "caf\xC3\xA9 \xC3\x28 \xFF\xFE broken\n";
  dir.write("a.txt", odd);
  dir.write("b.txt", "plain second document\n");
  PrepareStats st = prepare({dir / "a.txt", dir / "b.txt"}, dir / "ds", opts_for_tests());
  EXPECT_EQ(st.num_documents, 2);
  EXPECT_EQ(documents_of(ShardedDataset(dir / "ds")), (std::vector<std::string>{"caf\xC3\xA9 \xC3\x28 \xFF\xFE broken\n",
                                                                                 "plain second document\n"}));
}

TEST(PrepareBytes, NulBytesLaterInANamedFileAreAnErrorWithTheOffset) {
  TempDir dir;
  std::string text = testing::generated_corpus(20) + std::string("x\0y", 3);
  dir.write("a.txt", text);
  PrepareOptions o = opts_for_tests();
  testing::expect_data_error([&] { prepare({dir / "a.txt"}, dir / "ds", o); },
                             {(dir / "a.txt").string() + " is not text", "byte " + std::to_string(text.size() - 2)});
}

TEST(PrepareBytes, UncutHugeDocumentsStreamInFragmentsOfOneUnit) {
  TempDir dir;
  std::string big;
  while (big.size() < (size_t{18} << 20)) big += "a line of a very large single document\n";
  dir.write("big.txt", big);
  dir.write("small.txt", "the other document\n");
  PrepareOptions o = opts_for_tests();
  o.max_document_bytes = 0;  // never cut: the reader hands the document out in fragments
  o.num_threads = 2;
  PrepareStats st = prepare({dir / "big.txt", dir / "small.txt"}, dir / "ds", o);
  EXPECT_EQ(st.num_documents, 2);
  ShardedDataset ds(dir / "ds");
  std::vector<std::string> docs = documents_of(ds);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_TRUE(docs[0] == big || docs[1] == big) << "the large document must stay whole, without end-of-text inside";
}

}  // namespace
}  // namespace hwt
