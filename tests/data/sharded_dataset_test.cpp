// Sharded datasets: prepare into a directory, the manifest, and ShardedDataset's validation.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "data_test_util.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/default_corpus.h"
#include "hwtrain/data/manifest.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/shard_writer.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/tokenizer_files.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

PrepareOptions small_shards(int64_t shard_tokens = 1500) {
  PrepareOptions o;
  o.document_separator = "%";
  o.val_fraction = 0.2;
  o.shard_tokens = shard_tokens;
  o.progress = false;
  return o;
}

TEST(ShardedDataset, RoundTripEqualsTheSingleFile) {
  TempDir dir;
  fs::path corpus = dir.write("c.txt", testing::generated_corpus(300));
  PrepareOptions opts = small_shards(4000);
  PrepareStats st = prepare_dataset({corpus}, dir / "ds", opts);
  PrepareOptions single = opts;
  single.shard_tokens = 0;
  prepare_token_file({corpus}, dir / "one.hwt", single);

  ASSERT_TRUE(fs::exists(dir / "ds" / kManifestFile));
  ASSERT_TRUE(fs::exists(dir / "ds" / kTokenizerJsonFile));
  ShardedDataset ds(dir / "ds");
  ShardedDataset one(dir / "one.hwt");
  EXPECT_TRUE(ds.is_sharded());
  EXPECT_FALSE(one.is_sharded());
  EXPECT_GT(ds.num_shards(), 4u);
  EXPECT_EQ(static_cast<int64_t>(ds.num_shards()), st.num_shards);
  EXPECT_EQ(testing::to_vector(ds.train()), testing::to_vector(one.train()));
  EXPECT_EQ(testing::to_vector(ds.val()), testing::to_vector(one.val()));
  EXPECT_EQ(ds.fingerprint(), one.fingerprint());
  EXPECT_EQ(ds.tokenizer_name(), "byte");
  EXPECT_EQ(ds.vocab_size(), 257);
  EXPECT_EQ(ds.dtype(), TokenDtype::kUInt16);
  EXPECT_EQ(ds.num_train_documents() + ds.num_val_documents(), 300);
  EXPECT_EQ(ds.num_train_documents(), one.num_train_documents());
  // Every shard holds one split, numbered in manifest order, all but the last of a split full.
  const DatasetManifest& m = *ds.manifest();
  for (size_t i = 0; i < ds.num_shards(); ++i) {
    const TokenFileHeader& h = ds.shard(i).header();
    EXPECT_EQ(h.shard_index, i);
    EXPECT_EQ(h.num_shards, ds.num_shards());
    EXPECT_EQ(m.shards[i].num_tokens, h.num_tokens());
    bool last_of_split = i + 1 == ds.num_shards() || m.shards[i + 1].split != m.shards[i].split;
    if (!last_of_split) {
      EXPECT_EQ(h.num_tokens(), 4000);
    }
    EXPECT_EQ(m.shards[i].split == Split::kTrain ? h.num_val_tokens : h.num_train_tokens, 0);
  }
  EXPECT_EQ(m.shards.front().file, "train-00000.hwt");
  EXPECT_EQ(m.shards.back().file.rfind("val-", 0), 0u);
  EXPECT_EQ(m.sources.size(), 1u);
  EXPECT_EQ(m.sources[0]["path"], corpus.string());
}

TEST(ShardedDataset, SplitIsDeterministicAndFollowsTheSeed) {
  TempDir dir;
  fs::path corpus = dir.write("c.txt", testing::generated_corpus(200));
  PrepareOptions opts = small_shards();
  prepare_dataset({corpus}, dir / "a", opts);
  prepare_dataset({corpus}, dir / "b", opts);
  opts.split_seed = 99;
  prepare_dataset({corpus}, dir / "c", opts);
  ShardedDataset a(dir / "a"), b(dir / "b"), c(dir / "c");
  EXPECT_EQ(testing::to_vector(a.val()), testing::to_vector(b.val()));
  EXPECT_EQ(read_file(dir / "a" / "train-00000.hwt"), read_file(dir / "b" / "train-00000.hwt"));
  EXPECT_NE(testing::to_vector(a.val()), testing::to_vector(c.val()));
  EXPECT_NE(a.fingerprint(), c.fingerprint());
}

TEST(ShardedDataset, BothSplitsGetADocumentWhateverTheFraction) {
  TempDir dir;
  fs::path corpus = dir.write("c.txt", "one\n%\ntwo\n%\nthree\n");
  PrepareOptions o = small_shards();
  o.val_fraction = 1e-9;  // all train: the last document moves to validation
  prepare_dataset({corpus}, dir / "a", o);
  ShardedDataset a(dir / "a");
  EXPECT_EQ(testing::byte_text(a.train()), "one\n|two\n");
  EXPECT_EQ(testing::byte_text(a.val()), "three\n");
  o.val_fraction = 1 - 1e-9;  // all validation: the first document moves to train
  prepare_dataset({corpus}, dir / "b", o);
  ShardedDataset b(dir / "b");
  EXPECT_EQ(testing::byte_text(b.train()), "one\n");
  EXPECT_EQ(testing::byte_text(b.val()), "two\n|three\n");
}

TEST(ShardedDataset, FlippedByteIsRejectedWithFileAndOffset) {
  TempDir dir;
  prepare_dataset({dir.write("c.txt", testing::generated_corpus(200))}, dir / "ds", small_shards());
  fs::path shard = dir / "ds" / "train-00001.hwt";
  testing::flip_byte_at(shard, kTokenFileHeaderSize + 301);
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); },
                             {"checksum mismatch in " + shard.string(), "at bytes [256, ", "re-run hwtrain prepare"});
  // Without checksums the corrupt shard opens (headers only): the check is what catches it.
  EXPECT_NO_THROW(ShardedDataset(dir / "ds", DatasetOpenOptions{false}));
}

TEST(ShardedDataset, TruncatedAndMissingShardsAreNamed) {
  TempDir dir;
  prepare_dataset({dir.write("c.txt", testing::generated_corpus(200))}, dir / "ds", small_shards());
  fs::path shard = dir / "ds" / "train-00002.hwt";
  uint64_t size = fs::file_size(shard);
  fs::resize_file(shard, size - 10);
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); },
                             {shard.string(), "truncated at byte " + std::to_string(size - 10), std::to_string(size)});
  fs::remove(shard);
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); },
                             {"lists shard train-00002.hwt, which is missing", "manifest.json"});
}

TEST(ShardedDataset, ShardsAndManifestsNamingNonPlainFilesAreRefused) {
  TempDir dir;
  prepare_dataset({dir.write("c.txt", testing::generated_corpus(200))}, dir / "ds", small_shards());
  // A FIFO in a shard's place: refused at once (a plain open for reading would wait for a writer).
  const fs::path shard = dir / "ds" / "train-00001.hwt";
  fs::remove(shard);
  ASSERT_EQ(::mkfifo(shard.c_str(), 0600), 0);
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {shard.string(), "not a regular file"});
  // A shard name that leaves the dataset directory, however it is spelled.
  auto j = nlohmann::json::parse(read_file(dir / "ds" / kManifestFile));
  for (const std::string& bad : {std::string("../c.txt"), (dir / "c.txt").string(), std::string("./x.hwt")}) {
    j["shards"][0]["file"] = bad;
    write_file_atomic(dir / "ds" / kManifestFile, j.dump());
    testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {"'" + bad + "' is not a plain file name"});
  }
}

TEST(ShardedDataset, ShardFromAnotherDatasetIsRefused) {
  TempDir dir;
  prepare_dataset({dir.write("a.txt", testing::generated_corpus(200, true, 1))}, dir / "a", small_shards());
  prepare_dataset({dir.write("b.txt", testing::generated_corpus(200, true, 2))}, dir / "b", small_shards());
  fs::copy_file(dir / "b" / "train-00000.hwt", dir / "a" / "train-00000.hwt", fs::copy_options::overwrite_existing);
  testing::expect_data_error([&] { ShardedDataset ds(dir / "a"); },
                             {(dir / "a" / "train-00000.hwt").string(), "does not belong to"});
}

TEST(ShardedDataset, ManifestThatCannotHoldItsVocabularyIsRefused) {
  TempDir dir;
  prepare_dataset({dir.write("c.txt", testing::generated_corpus(100))}, dir / "ds", small_shards());
  auto j = nlohmann::json::parse(read_file(dir / "ds" / kManifestFile));
  j["vocab_size"] = 70000;  // uint16 tokens cannot hold ids of a 70,000 vocabulary
  write_file_atomic(dir / "ds" / kManifestFile, j.dump());
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {"70000 does not fit its uint16 tokens"});
  write_file_atomic(dir / "ds" / kManifestFile, "{\"format\": \"hwtrain-dataset\", ");
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {"not valid JSON"});
  fs::remove(dir / "ds" / kManifestFile);
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {"has no manifest.json"});
}

// Found by fuzz/dataset_manifest under UBSan: a float where an integer belongs was converted
// (2e+256 into uint64_t: undefined behaviour); negative and oversized integers were wrapped.
TEST(ShardedDataset, ManifestIntegersMustBeIntegersInRange) {
  TempDir dir;
  prepare_dataset({dir.write("c.txt", testing::generated_corpus(100))}, dir / "ds", small_shards());
  const auto good = nlohmann::json::parse(read_file(dir / "ds" / kManifestFile));
  for (const nlohmann::json& bad : {nlohmann::json(2e256), nlohmann::json(1.5), nlohmann::json(-1),
                                    nlohmann::json(uint64_t{1} << 40), nlohmann::json("7")}) {
    auto j = good;
    j["shards"][0]["crc32c"] = bad;  // a uint32_t field
    write_file_atomic(dir / "ds" / kManifestFile, j.dump());
    SCOPED_TRACE(bad.dump());
    testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {"field 'crc32c' has the wrong type or range"});
  }
  auto j = good;
  j["shards"][0]["bytes"] = 2e256;  // uint64_t
  write_file_atomic(dir / "ds" / kManifestFile, j.dump());
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {"field 'bytes' has the wrong type or range"});
  j = good;
  j["shards"][0]["block_crc32c"][0] = -3;  // elements of a uint32_t list
  write_file_atomic(dir / "ds" / kManifestFile, j.dump());
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {"field 'block_crc32c' has the wrong type or range"});
  // Optional fields of the wrong type: nlohmann's value() threw its own error, naming nothing.
  j = good;
  j["format"] = 57;
  write_file_atomic(dir / "ds" / kManifestFile, j.dump());
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {"field 'format' has the wrong type or range"});
  j = good;
  j["created_by"] = nlohmann::json::array();
  write_file_atomic(dir / "ds" / kManifestFile, j.dump());
  testing::expect_data_error([&] { ShardedDataset ds(dir / "ds"); }, {"field 'created_by' has the wrong type or range"});
}

TEST(ShardedDataset, HeaderVocabularyLargerThanItsDtypeIsRefused) {
  TokenFileHeader h;
  h.vocab_size = 70000;
  h.dtype = TokenDtype::kUInt16;
  h.num_train_tokens = 1;
  h.tokenizer_name = "x";
  std::string bytes = encode_token_file_header(h);
  testing::expect_data_error([&] { decode_token_file_header(bytes.data(), bytes.size(), h.expected_file_size(), "x.hwt"); },
                             {"x.hwt", "vocabulary of 70000 does not fit its uint16 tokens"});
}

TEST(ShardedDataset, LargeVocabulariesUseUint32Shards) {
  TempDir dir;
  const int64_t vocab = 70000;
  std::vector<int32_t> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(static_cast<int32_t>((i * 7919) % vocab));
  ShardSetWriter w(dir.path(), 300, vocab, "big");
  w.begin_document(Split::kTrain);
  w.append(Split::kTrain, ids.data(), 900);
  w.begin_document(Split::kVal);
  w.append(Split::kVal, ids.data() + 900, 100);
  DatasetManifest m;
  m.fingerprint = 7;
  m.tokenizer_name = "big";
  m.vocab_size = vocab;
  m.dtype = dtype_for_vocab(vocab);
  m.num_train_tokens = 900;
  m.num_val_tokens = 100;
  m.shards = w.commit(7);
  write_manifest(dir.path(), m);
  ShardedDataset ds(dir.path());
  EXPECT_EQ(ds.dtype(), TokenDtype::kUInt32);
  EXPECT_EQ(ds.num_shards(), 4u);
  std::vector<int64_t> all = testing::to_vector(ds.train()), val = testing::to_vector(ds.val());
  all.insert(all.end(), val.begin(), val.end());
  EXPECT_EQ(all, std::vector<int64_t>(ids.begin(), ids.end()));
  EXPECT_THROW(w.append(Split::kTrain, std::vector<int32_t>{70000}.data(), 1), DataError);  // out of vocabulary
}

TEST(ShardedDataset, InterruptedPrepareLeavesNoManifestAndNoShard) {
  TempDir dir;
  // Enough JSONL for several shards, then a bad line that --strict turns into an error at the end.
  std::string jsonl;
  for (int i = 0; i < 400; ++i) jsonl += "{\"text\": \"document number " + std::to_string(i) + " with some words\"}\n";
  jsonl += "not json\n";
  dir.write("c.jsonl", jsonl);
  PrepareOptions opts = small_shards(200);
  opts.strict = true;
  testing::expect_data_error([&] { prepare_dataset({dir / "c.jsonl"}, dir / "ds", opts); },
                             {(dir / "c.jsonl").string() + ":401: not valid JSON"});
  for (const auto& e : fs::directory_iterator(dir.path())) {
    // Sealed shards are temporaries of a staging directory, removed with it on error.
    if (e.path().filename() != "c.jsonl") ADD_FAILURE() << "left behind: " << e.path();
  }
}

TEST(ShardedDataset, ReplacesAPreviousDatasetButNotOtherDirectories) {
  TempDir dir;
  fs::path corpus = dir.write("c.txt", testing::generated_corpus(300));
  prepare_dataset({corpus}, dir / "ds", small_shards(2000));
  size_t before = ShardedDataset(dir / "ds").num_shards();
  prepare_dataset({corpus}, dir / "ds", small_shards(20000));  // fewer, larger shards
  ShardedDataset ds(dir / "ds");
  EXPECT_LT(ds.num_shards(), before);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir / "ds")) files += e.path().extension() == ".hwt";
  EXPECT_EQ(files, ds.num_shards()) << "stale shards of the previous dataset must go";
  dir.write("other/notes.txt", "mine");
  EXPECT_THROW(prepare_dataset({corpus}, dir / "other", small_shards()), ConfigError);
  EXPECT_TRUE(fs::exists(dir / "other/notes.txt"));
}

TEST(ShardedDataset, PrepareChoosesTheOutputKindByName) {
  TempDir dir;
  fs::path corpus = dir.write("c.txt", testing::generated_corpus(50));
  PrepareOptions o = small_shards(0);
  EXPECT_FALSE(is_dataset_output("x.hwt", o));
  EXPECT_TRUE(is_dataset_output("x", o));
  PrepareStats a = prepare({corpus}, dir / "x.hwt", o);
  EXPECT_FALSE(a.sharded);
  EXPECT_TRUE(fs::is_regular_file(dir / "x.hwt"));
  PrepareStats b = prepare({corpus}, dir / "x", o);
  EXPECT_TRUE(b.sharded);
  EXPECT_EQ(ShardedDataset(dir / "x").manifest()->shard_tokens, kDefaultShardTokens);
  EXPECT_EQ(ShardedDataset(dir / "x" / kManifestFile).num_shards(), 2u);  // the manifest path opens it too
}

TEST(ShardedDataset, ResolveDatasetTakesADatasetDirectoryAsIs) {
  TempDir dir;
  prepare_dataset({dir.write("c.txt", testing::generated_corpus(50))}, dir / "ds", small_shards());
  DataConfig cfg;
  cfg.path = (dir / "ds").string();
  cfg.cache_dir = (dir / "cache").string();
  EXPECT_EQ(resolve_dataset(cfg), dir / "ds");
  EXPECT_FALSE(fs::exists(dir / "cache"));
  EXPECT_EQ(data_vocab_size(cfg), 257);
  DatasetManifest m = read_manifest(dir / "ds");
  m.vocab_size = 300;  // what the manifest says is what counts, not data.tokenizer
  write_manifest(dir / "ds", m);
  EXPECT_EQ(data_vocab_size(cfg), 300);
  cfg.tokenizer = (dir / "nope.model").string();
  EXPECT_THROW(resolve_dataset(cfg), ConfigError);
}

}  // namespace
}  // namespace hwt
