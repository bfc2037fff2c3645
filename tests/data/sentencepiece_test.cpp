// SentencePiece: training, encoding round trips, tokenizer files, and datasets that carry them.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sys/stat.h>

#include <fstream>

#include "data_test_util.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/sentencepiece_tokenizer.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/tokenizer_files.h"
#include "hwtrain/data/tokenizer_trainer.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

// A tiny model: 100 pieces, trained in well under a second.
TokenizerTrainStats train_tiny(const TempDir& dir, const std::string& out, const std::string& type = "bpe",
                               uint64_t corpus_seed = 1) {
  fs::path corpus = dir.write("corpus-" + std::to_string(corpus_seed) + ".txt", testing::generated_corpus(400, true, corpus_seed));
  TokenizerTrainOptions o;
  o.vocab_size = 100;
  o.model_type = type;
  o.character_coverage = 1.0;
  o.read.document_separator = "%";
  o.num_threads = 1;
  return train_tokenizer({corpus}, dir / out, o);
}

TEST(SentencePiece, TrainsAndRoundTripsText) {
  TempDir dir;
  TokenizerTrainStats st = train_tiny(dir, "tok");
  EXPECT_TRUE(fs::exists(dir / "tok" / kTokenizerModelFile));
  EXPECT_TRUE(fs::exists(dir / "tok" / kTokenizerJsonFile));
  EXPECT_EQ(st.name.rfind("spm:", 0), 0u);
  EXPECT_EQ(st.name.size(), 4u + 16u);
  EXPECT_EQ(st.num_documents, 400);
  auto tok = make_tokenizer((dir / "tok" / kTokenizerModelFile).string());
  EXPECT_EQ(tok->name(), st.name);
  EXPECT_EQ(tok->vocab_size(), 100);
  EXPECT_EQ(tok->eot_id(), 1);
  EXPECT_FALSE(tok->is_byte_level());
  const std::string text = "The lazy dog runs far away.\nA small town  of stone.\n";
  std::vector<int32_t> ids = tok->encode(text);
  EXPECT_LT(ids.size(), text.size()) << "BPE merges must shorten the text";
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, tok->vocab_size());
    EXPECT_NE(id, tok->eot_id()) << "encode never produces end-of-text";
  }
  EXPECT_EQ(tok->decode(ids), text);
  ids.push_back(tok->eot_id());
  ids.push_back(5000);  // a padded-vocabulary id a model may sample
  EXPECT_EQ(tok->decode(ids), text + "\n\xEF\xBF\xBD");
}

TEST(SentencePiece, DirectoriesLoadAndTheNameFollowsTheModel) {
  TempDir dir;
  TokenizerTrainStats bpe = train_tiny(dir, "bpe");
  TokenizerTrainStats uni = train_tiny(dir, "uni", "unigram");
  EXPECT_NE(bpe.name, uni.name);
  auto a = make_tokenizer((dir / "bpe").string());
  EXPECT_EQ(a->name(), bpe.name);
  auto b = load_tokenizer(dir / "uni");
  EXPECT_EQ(b->name(), uni.name);
  EXPECT_EQ(b->decode(b->encode("Glass houses.\n")), "Glass houses.\n");
  // A model swapped under its tokenizer.json is caught.
  fs::copy_file(dir / "uni" / kTokenizerModelFile, dir / "bpe" / kTokenizerModelFile, fs::copy_options::overwrite_existing);
  testing::expect_data_error([&] { load_tokenizer(dir / "bpe"); }, {"was replaced"});
  EXPECT_THROW(make_tokenizer((dir / "missing.model").string()), ConfigError);
  dir.write("junk.model", "not a model");
  EXPECT_THROW(make_tokenizer((dir / "junk.model").string()), ConfigError);
}

// A tokenizer.json as transformers converts a Llama tokenizer.model (legacy): the model's pieces, its
// control and unknown pieces as added tokens, Prepend "▁" + Replace " " -> "▁", and the decoder.
nlohmann::json llama_tokenizer_json(const fs::path& model) {
  sentencepiece::SentencePieceProcessor sp;
  EXPECT_TRUE(sp.Load(model.string()).ok());
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    vocab[sp.IdToPiece(id)] = id;
    if (sp.IsControl(id) || sp.IsUnknown(id)) {
      added.push_back({{"id", id}, {"content", sp.IdToPiece(id)}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", true}});
    }
  }
  nlohmann::json j = nlohmann::json::parse(R"({
      "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                     {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
      "pre_tokenizer": null,
      "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                  {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
      "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "merges": []}})");
  j["added_tokens"] = added;
  j["model"]["vocab"] = vocab;
  return j;
}

// A Hugging Face directory of Llama 2 or Mistral: its tokenizer.json (byte_fallback, normalizers:
// not byte-level BPE) and the tokenizer.model beside it, which encodes as the tokenizer.json says
// (tests/data/hf_sentencepiece_test.cpp holds that to transformers); what it cannot follow is refused.
TEST(SentencePiece, HuggingFaceDirectoriesOfLlama2AndMistralUseTheirTokenizerModel) {
  TempDir dir;
  TokenizerTrainStats st = train_tiny(dir, "tok");  // identity normalization, no dummy prefix of its own
  fs::create_directories(dir / "hf");
  fs::copy_file(dir / "tok" / kTokenizerModelFile, dir / "hf" / kTokenizerModelFile);
  const nlohmann::json llama = llama_tokenizer_json(dir / "hf" / kTokenizerModelFile);
  // Llama 2's tokenizer.json has 1.8 MB, hwtrain's own a few hundred bytes.
  dir.write("hf/tokenizer.json", llama.dump() + std::string(2 << 20, ' '));
  auto tok = load_tokenizer(dir / "hf");
  EXPECT_EQ(tok->name().rfind("hf-spm:", 0), 0u) << tok->name();
  EXPECT_NE(tok->name(), st.name);
  auto plain = make_tokenizer((dir / "tok").string());
  const int32_t eot = plain->eot_id();
  EXPECT_EQ(tok->eot_id(), eot);
  const std::string eot_text = llama["added_tokens"][1]["content"];  // </s>
  EXPECT_EQ(llama["added_tokens"][1]["id"], eot);
  // Prepend "▁" before every piece between added tokens (legacy); their text is their id.
  const std::string text = "The lazy dog runs  far away.";
  EXPECT_EQ(tok->encode(text), plain->encode(" " + text));
  std::vector<int32_t> want = plain->encode(" dog");
  want.push_back(eot);
  for (int32_t id : plain->encode(" far")) want.push_back(id);
  EXPECT_EQ(tok->encode("dog" + eot_text + "far"), want);
  EXPECT_EQ(tok->decode(tok->encode(text)), text);          // Strip takes the prefix off again
  EXPECT_EQ(tok->decode(want), "dog" + eot_text + " far");  // as tokenizers decodes it
  // Saved (with a dataset, a checkpoint) as Hugging Face's two files.
  save_tokenizer(*tok, dir / "saved");
  EXPECT_EQ(read_file(dir / "saved" / kTokenizerJsonFile), read_file(dir / "hf" / kTokenizerJsonFile));
  EXPECT_EQ(load_tokenizer(dir / "saved")->name(), tok->name());
  // Without Prepend (transformers' conversion when add_prefix_space is unset): the model's own pieces.
  nlohmann::json no_prefix = llama;
  no_prefix["normalizer"]["normalizers"].erase(0);
  dir.write("hf/tokenizer.json", no_prefix.dump());
  EXPECT_EQ(load_tokenizer(dir / "hf")->encode(text), plain->encode(text));
  // What it cannot follow is refused by name.
  const auto refused = [&](nlohmann::json j, const std::string& needle) {
    dir.write("hf/tokenizer.json", j.dump());
    testing::expect_data_error([&] { load_tokenizer(dir / "hf"); }, {needle});
  };
  nlohmann::json bad = llama;
  bad["normalizer"]["normalizers"][0] = {{"type", "NFKC"}};
  refused(bad, "normalizer 'NFKC'");
  bad = llama;  // two pieces swapped
  std::string a, b;
  for (auto it = bad["model"]["vocab"].begin(); it != bad["model"]["vocab"].end(); ++it) {
    if (it.value() == 10) a = it.key();
    if (it.value() == 11) b = it.key();
  }
  bad["model"]["vocab"][a] = 11;
  bad["model"]["vocab"][b] = 10;
  refused(bad, "not converted from one another");
  bad = llama;
  bad["added_tokens"][1]["normalized"] = true;
  refused(bad, "normalized: true");
  bad = llama;
  bad.erase("normalizer");
  bad["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}};
  refused(bad, "Metaspace");
  dir.write("hf/tokenizer.json", llama.dump());
  fs::remove(dir / "hf" / kTokenizerModelFile);  // without it, the tokenizer.json's problem is named
  testing::expect_data_error([&] { load_tokenizer(dir / "hf"); }, {"normalizer"});
}

TEST(SentencePiece, InvalidUtf8IsReportedNotMangled) {
  TempDir dir;
  train_tiny(dir, "tok");
  auto tok = make_tokenizer((dir / "tok").string());
  testing::expect_data_error([&] { tok->encode("ok \xC3\x28 bad"); }, {"invalid UTF-8 at byte offset 3"});
  std::string text = testing::generated_corpus(30);
  const size_t at = text.size();
  text += "bad \xFF byte\n%\n";
  dir.write("bad.txt", text);
  PrepareOptions o;
  o.tokenizer = (dir / "tok").string();
  o.document_separator = "%";
  o.progress = false;
  testing::expect_data_error([&] { prepare({dir / "bad.txt"}, dir / "ds", o); },
                             {"invalid UTF-8 in " + (dir / "bad.txt").string() + " at byte offset " + std::to_string(at + 4),
                              "--tokenizer byte"});
  // Training on it is refused at the same place, rather than trained on and refused by prepare.
  TokenizerTrainOptions t;
  t.vocab_size = 100;
  t.read.document_separator = "%";
  t.num_threads = 1;
  testing::expect_data_error([&] { train_tokenizer({dir / "bad.txt"}, dir / "tok2", t); },
                             {"invalid UTF-8 in " + (dir / "bad.txt").string() + " at byte offset " + std::to_string(at + 4)});
  EXPECT_FALSE(fs::exists(dir / "tok2"));  // the directory made for it goes with the failed training
  EXPECT_THROW(train_tokenizer({dir / "missing.txt"}, dir / "tok3", t), DataError);
  EXPECT_FALSE(fs::exists(dir / "tok3"));
  fs::create_directories(dir / "kept");  // one that was there stays
  EXPECT_THROW(train_tokenizer({dir / "bad.txt"}, dir / "kept", t), DataError);
  EXPECT_TRUE(fs::is_directory(dir / "kept"));
}

TEST(SentencePiece, DatasetCarriesItsTokenizerAndRefusesOthers) {
  TempDir dir;
  TokenizerTrainStats st = train_tiny(dir, "tok");
  train_tiny(dir, "other", "bpe", 2);
  const std::string text = testing::generated_corpus(100);
  dir.write("c.txt", text);
  PrepareOptions o;
  o.tokenizer = (dir / "tok").string();
  o.document_separator = "%";
  o.val_fraction = 0.2;
  o.shard_tokens = 300;
  o.progress = false;
  prepare({dir / "c.txt"}, dir / "ds", o);
  EXPECT_EQ(read_file(dir / "ds" / kTokenizerModelFile), read_file(dir / "tok" / kTokenizerModelFile));
  ShardedDataset ds(dir / "ds");
  EXPECT_EQ(ds.tokenizer_name(), st.name);
  EXPECT_EQ(ds.vocab_size(), 100);
  EXPECT_GT(ds.num_shards(), 2u);
  // The dataset's own tokenizer decodes its tokens back to the documents.
  auto tok = dataset_tokenizer(ds, "byte");  // the default spec defers to the dataset's tokenizer
  EXPECT_EQ(tok->name(), st.name);
  std::vector<int64_t> all = testing::to_vector(ds.train());
  std::string decoded = tok->decode(std::vector<int32_t>(all.begin(), all.end()));
  EXPECT_NE(decoded.find("\n"), std::string::npos);
  EXPECT_EQ(decoded.find("%"), std::string::npos);
  EXPECT_NE(text.find(decoded.substr(0, 40)), std::string::npos) << decoded.substr(0, 40);
  EXPECT_EQ(dataset_tokenizer(ds, (dir / "tok").string())->name(), st.name);
  testing::expect_data_error([&] { dataset_tokenizer(ds, (dir / "other").string()); },
                             {"was prepared with tokenizer '" + st.name + "'"});
  // Training another tokenizer into the dataset is refused: its shards were encoded with this one.
  try {
    train_tiny(dir, "ds", "bpe", 2);
    FAIL() << "a dataset's tokenizer was replaced";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("is a dataset hwtrain prepare wrote"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(dir / "ds" / kTokenizerModelFile), read_file(dir / "tok" / kTokenizerModelFile));
  // A model directory may be given a tokenizer, not have its own replaced.
  dir.write("model/config.json", "{}");
  train_tiny(dir, "model");
  EXPECT_THROW(train_tiny(dir, "model", "bpe", 2), ConfigError);
  dir.write("web/manifest.json", "{\"name\": \"app\"}");  // a web project's, not a dataset's
  EXPECT_NO_THROW(train_tiny(dir, "web"));
  // A checkpoint gets the same files.
  copy_tokenizer_files(ds, "byte", dir / "ckpt");
  EXPECT_EQ(load_tokenizer(dir / "ckpt")->name(), st.name);
  // A single token file names its tokenizer; the spec must match it.
  o.shard_tokens = 0;
  prepare({dir / "c.txt"}, dir / "one.hwt", o);
  ShardedDataset one(dir / "one.hwt");
  EXPECT_EQ(one.tokenizer_name(), st.name);
  EXPECT_THROW(dataset_tokenizer(one, "byte"), DataError);
  EXPECT_EQ(dataset_tokenizer(one, (dir / "tok" / kTokenizerModelFile).string())->name(), st.name);
}

TEST(SentencePiece, ByteTokenizerFilesRoundTrip) {
  TempDir dir;
  save_tokenizer(*make_tokenizer("byte"), dir / "t");
  EXPECT_FALSE(fs::exists(dir / "t" / kTokenizerModelFile));
  auto tok = load_tokenizer(dir / "t");
  EXPECT_EQ(tok->name(), "byte");
  EXPECT_EQ(tok->vocab_size(), 257);
  testing::expect_data_error([&] { load_tokenizer(dir / "none"); }, {"no tokenizer in"});
}

TEST(SentencePiece, TrainingErrorsAreClear) {
  TempDir dir;
  dir.write("empty.txt", "");
  TokenizerTrainOptions o;
  o.vocab_size = 100;
  testing::expect_data_error([&] { train_tokenizer({dir / "empty.txt"}, dir / "t", o); }, {"is empty"});
  o.model_type = "wordpiece";
  EXPECT_THROW(train_tokenizer({dir / "empty.txt"}, dir / "t", o), ConfigError);
  // Fewer pieces than the corpus has characters: the way out is a larger vocabulary.
  dir.write("text.txt", testing::generated_corpus(50));
  o.model_type = "bpe";
  o.vocab_size = 16;
  o.character_coverage = 1.0;
  o.num_threads = 1;
  try {
    train_tokenizer({dir / "text.txt"}, dir / "t16", o);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("try a larger --vocab-size"), std::string::npos) << e.what();
  }
}

TEST(SentencePiece, TokenizerJsonNamesOnlyPlainFilesInsideItsDirectory) {
  TempDir dir;
  const TokenizerTrainStats own = train_tiny(dir, "tok");
  const TokenizerTrainStats other = train_tiny(dir, "other", "bpe", 2);  // a valid model elsewhere
  const fs::path json_path = dir / "tok" / kTokenizerJsonFile;
  const nlohmann::json original = nlohmann::json::parse(read_file(json_path));
  auto names = [&](const nlohmann::json& file, const std::string& name) {
    nlohmann::json j = original;
    j["file"] = file;
    j["name"] = name;
    std::ofstream(json_path, std::ios::trunc) << j.dump();
  };
  // Outside the directory: refused by name, before anything is opened (the other model's name is
  // written too, so only the path check stands between it and a load that bypasses the checksums).
  for (const std::string& bad : {std::string("../../../../../etc/passwd"), (dir / "other" / kTokenizerModelFile).string(),
                                std::string("../other/") + kTokenizerModelFile, std::string("/dev/zero")}) {
    names(bad, other.name);
    testing::expect_data_error([&] { load_tokenizer(dir / "tok"); }, {json_path.string(), "\"file\"", bad});
  }
  names(42, own.name);
  testing::expect_data_error([&] { load_tokenizer(dir / "tok"); }, {"\"file\" is 42"});
  // Inside it but not a plain file: a FIFO (refused at once, where a plain open would block) and a link.
  ASSERT_EQ(::mkfifo((dir / "tok" / "fifo.model").c_str(), 0600), 0);
  names("fifo.model", own.name);
  testing::expect_data_error([&] { load_tokenizer(dir / "tok"); }, {"fifo.model", "FIFO"});
  fs::create_symlink(dir / "other" / kTokenizerModelFile, dir / "tok" / "link.model");
  names("link.model", other.name);
  testing::expect_data_error([&] { load_tokenizer(dir / "tok"); }, {"link.model", "symbolic link"});
  names(kTokenizerModelFile, own.name);
  EXPECT_EQ(load_tokenizer(dir / "tok")->name(), own.name);
}

}  // namespace
}  // namespace hwt
