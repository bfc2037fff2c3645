// Hugging Face byte-level BPE (tokenizer.json) against the `tokenizers` library: two tokenizers
// trained by it on generated text (GPT-2 style; Llama 3 style with a Split regex and ignore_merges;
// Qwen2 style with NFC before its Split regex),
// then the ids of 3 MB of held-out mixed text (Unicode, whitespace runs, digits, contractions,
// special tokens, and the added non-special tokens <think> and </think>) must be the same, and decoding gives the text back. Skips, saying why, where the
// test python has no tokenizers. Unsupported kinds are refused by name.
#include "hwtrain/data/hf_bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <cstdlib>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/tokenizer_files.h"
#include "support/python_reference.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

const std::string& reference_dir() {
  static const std::string made =
      testing::python_reference("tokenizers", "data/reference/hf_tokenizers_reference.py", "3");
  return made;
}

class HfBpe : public ::testing::TestWithParam<std::string> {};

TEST_P(HfBpe, IdsEqualTokenizersAndDecodingRoundTrips) {
  if (reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no tokenizers";
  const fs::path dir(reference_dir());
  const std::string style = GetParam();
  auto tok = load_tokenizer(dir / style);
  ASSERT_NE(dynamic_cast<const HfBpeTokenizer*>(tok.get()), nullptr);
  // data.tokenizer naming the tokenizer.json file means its directory (it was read as a .model).
  EXPECT_EQ(make_tokenizer((dir / style / "tokenizer.json").string())->name(), tok->name());
  const std::string text = read_file(dir / "text.txt");
  const std::string raw = read_file(dir / (style + ".ids"));
  std::vector<int32_t> want(raw.size() / 4);
  std::memcpy(want.data(), raw.data(), raw.size());
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(ids.size(), want.size());
  size_t first_diff = ids.size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != want[i]) {
      first_diff = i;
      break;
    }
  }
  EXPECT_EQ(first_diff, ids.size()) << "first different id at " << first_diff;
  if (style != "qwen2") {
    EXPECT_EQ(tok->decode(ids), text);  // NFC changes the text (decomposed forms)
  }
  std::printf("%s: %zu ids; hwtrain %.3f s, tokenizers %s s (1 thread; timings are bench/'s job)\n", style.c_str(),
              ids.size(), seconds, read_file(dir / (style + ".seconds")).c_str());
  // It travels with datasets and checkpoints as Hugging Face's own file.
  testing::TempDir copy;
  save_tokenizer(*tok, copy.path());
  EXPECT_EQ(read_file(copy / "tokenizer.json"), read_file(dir / style / "tokenizer.json"));
  EXPECT_EQ(load_tokenizer(copy.path())->name(), tok->name());
}

INSTANTIATE_TEST_SUITE_P(Styles, HfBpe, ::testing::Values("gpt2", "llama3", "qwen2"));

// The merge loop the heap replaced: rescan every pair, merge the lowest rank (leftmost on ties).
std::vector<std::string> naive_bpe(const std::string& word, const std::map<std::string, int>& rank) {
  std::vector<std::string> sym;
  for (const char c : word) sym.emplace_back(1, c);
  for (;;) {
    int best = INT32_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      const auto it = rank.find(sym[i] + " " + sym[i + 1]);
      if (it != rank.end() && it->second < best) best = it->second, at = i;
    }
    if (best == INT32_MAX) return sym;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
}

TEST(HfBpeTokenizer, MergesMatchTheRescanningLoopAndLongWordsStayLinear) {
  const std::vector<std::string> merges = {"a a", "a b", "aa b", "b c", "aab bc", "c c", "aa aa", "cc a", "ab ab"};
  std::map<std::string, int> rank;
  nlohmann::json vocab = {{"a", 0}, {"b", 1}, {"c", 2}};
  for (size_t i = 0; i < merges.size(); ++i) {
    rank[merges[i]] = static_cast<int>(i);
    std::string joined = merges[i];
    joined.erase(joined.find(' '), 1);
    if (!vocab.contains(joined)) vocab[joined] = static_cast<int>(vocab.size());
  }
  const int eot = static_cast<int>(vocab.size());
  const nlohmann::json spec = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
      {"added_tokens", {{{"id", eot}, {"content", "<|endoftext|>"}, {"special", true}}}}};
  const HfBpeTokenizer tok(spec.dump(), "merges.json");
  std::mt19937 gen(7);
  for (int trial = 0; trial < 400; ++trial) {
    std::string word(1 + gen() % 80, 'a');  // short words are merged by rescanning, long ones (> 12) by a heap
    for (char& c : word) c = "aaabbc"[gen() % 6];
    std::vector<int32_t> want;
    for (const std::string& piece : naive_bpe(word, rank)) want.push_back(vocab.at(piece).get<int32_t>());
    ASSERT_EQ(tok.encode(word), want) << word;
  }
  // 16,000 identical characters (took 4.6 s when every merge rescanned the word): 4,000 "aaaa".
  const std::vector<int32_t> ids = tok.encode(std::string(16000, 'a'));
  EXPECT_EQ(ids, std::vector<int32_t>(4000, vocab.at("aaaa").get<int32_t>()));
}

TEST(HfBpeTokenizer, UnsupportedKindsAreRefusedByName) {
  const std::string bpe = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
      "added_tokens": [{"id": 1, "content": "<|endoftext|>", "special": true}]})";
  HfBpeTokenizer ok(bpe, "t.json");
  EXPECT_EQ(ok.eot_id(), 1);
  EXPECT_EQ(ok.vocab_size(), 2);
  auto error = [](const std::string& json) {
    try {
      HfBpeTokenizer t(json, "t.json");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string wordpiece = bpe;
  wordpiece.replace(wordpiece.find("\"BPE\""), 5, "\"WordPiece\"");
  EXPECT_NE(error(wordpiece).find("model.type 'WordPiece'"), std::string::npos);
  EXPECT_NE(error(R"({"normalizer": {"type": "NFKC"},)" + bpe.substr(1)).find("a normalizer other than NFC"),
            std::string::npos);
  std::string no_eot = bpe;
  no_eot.replace(no_eot.find("<|endoftext|>"), 13, "<pad>");
  EXPECT_NE(error(no_eot).find("no end-of-text token"), std::string::npos);
  // Ids that are no integers in range (found by the tokenizer_json fuzzer: 1.1e39 converted to int
  // was undefined behaviour).
  for (const char* id : {"1111111111111111111111111111111111111118", "1.5", "-3", "\"7\"", "16777216"}) {
    std::string bad = bpe;
    bad.replace(bad.find("\"a\": 0"), 6, std::string("\"a\": ") + id);
    EXPECT_NE(error(bad).find("token 'a' has id"), std::string::npos) << id << ": " << error(bad);
  }
}

}  // namespace
}  // namespace hwt
