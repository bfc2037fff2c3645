// Hugging Face's form of a SentencePiece model (Llama 2, Mistral) against transformers' fast tokenizer.
// tests/data/reference/hf_sentencepiece_reference.py trains a 16,000-piece BPE model with Llama 2's
// options and converts it as transformers does, in three variants (llama2: legacy, the normalizer of
// Llama 2's tokenizer.json; metaspace: legacy=False; noprefix: transformers 4.57's conversion without
// add_prefix_space), then tokenizes ~1.9 MB of documents: half the fortunes corpus, generated mixed text
// (Unicode, characters only byte fallback covers, whitespace runs, digits, the text of <s> </s> <unk>,
// literal "▁") and edge cases. What is compared, document by document and without BOS (Llama's encode
// puts <s> first, by its post-processor; hwtrain's prepare adds none and puts </s> between documents):
// hwtrain's ids through make_tokenizer(DIR), the route of `hwtrain prepare --tokenizer DIR`, and
// AutoTokenizer(DIR)(doc, add_special_tokens=False); hwtrain's decode of those ids and transformers'
// decode(skip_special_tokens=False), for each document, for all of them joined by </s>, and for random
// id sequences. Then prepare over the same documents writes the same ids. Skips, saying why, where the
// test python lacks transformers, sentencepiece or protobuf (scripts/install-deps.sh installs them).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data_test_util.h"
#include "hwtrain/core/files.h"
#include "hwtrain/data/corpus.h"
#include "hwtrain/data/prepare.h"
#include "hwtrain/data/sentencepiece_tokenizer.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/tokenizer_files.h"
#include "support/python_reference.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

const std::string& spm_reference_dir() {
  static const std::string made = testing::python_reference("transformers,sentencepiece,google.protobuf",
                                                            "data/reference/hf_sentencepiece_reference.py", "");
  return made;
}

const char* const kNoSpmReference =
    HWTRAIN_PYTHON " lacks transformers, sentencepiece or protobuf (scripts/install-deps.sh)";

std::vector<int32_t> read_spm_int32s(const fs::path& path) {
  const std::string raw = read_file(path);
  std::vector<int32_t> v(raw.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), raw.data(), v.size() * 4);
  return v;
}

const std::vector<std::string>& spm_documents() {
  static const std::vector<std::string> docs = [] {
    std::vector<std::string> d;
    std::istringstream in(read_file(fs::path(spm_reference_dir()) / "docs.jsonl"));
    for (std::string line; std::getline(in, line);) d.push_back(nlohmann::json::parse(line).at("text"));
    return d;
  }();
  return docs;
}

// `text` as a JSON string, for failure messages (a cut UTF-8 sequence shown as U+FFFD).
std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// "first difference at id 2: hwtrain [ a b c ] transformers [ a b d ] in "text..."" for a failure message.
std::string show_spm_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                                const std::string& doc) {
  size_t k = 0;
  while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
  std::ostringstream s;
  const auto slice = [&](const std::vector<int32_t>& v) {
    s << "[";
    for (size_t i = k >= 2 ? k - 2 : 0; i < std::min(v.size(), k + 4); ++i) s << " " << v[i];
    s << " ]";
  };
  s << "first difference at id " << k << ": hwtrain ";
  slice(got);
  s << " transformers ";
  slice(want);
  s << " in " << quoted(doc.substr(0, 120));
  return s.str();
}

// One variant: ids and decoding of every document, the stream decoded, random ids decoded, saving.
void expect_variant_equals_transformers(const fs::path& dir, const std::string& variant) {
  SCOPED_TRACE(variant);
  auto tok = make_tokenizer((dir / variant).string());  // what prepare --tokenizer DIR builds
  const auto* spm = dynamic_cast<const SentencePieceTokenizer*>(tok.get());
  ASSERT_NE(spm, nullptr);
  ASSERT_FALSE(spm->hf_json_text().empty()) << "the Hugging Face form, not the bare model";
  EXPECT_EQ(tok->eot_id(), 2);  // </s>
  EXPECT_EQ(tok->vocab_size(), spm->num_pieces());
  const std::vector<std::string>& docs = spm_documents();
  const std::vector<int32_t> want_all = read_spm_int32s(dir / (variant + ".ids"));
  const std::vector<int32_t> lengths = read_spm_int32s(dir / (variant + ".lengths"));
  const nlohmann::json decoded = nlohmann::json::parse(read_file(dir / (variant + ".decoded.json")));
  ASSERT_EQ(lengths.size(), docs.size());
  ASSERT_EQ(decoded.size(), docs.size());

  size_t at = 0, num_bytes = 0, ids_differ = 0, decode_differs = 0, round_trips = 0;
  std::vector<int32_t> stream;
  double seconds = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::vector<int32_t> want(
        want_all.begin() + static_cast<std::ptrdiff_t>(at),
        want_all.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(lengths[i])));
    at += static_cast<size_t>(lengths[i]);
    num_bytes += docs[i].size();
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok->encode(docs[i]);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (ids != want && ++ids_differ <= 5)
      ADD_FAILURE() << variant << " document " << i << ": " << show_spm_difference(ids, want, docs[i]);
    const std::string text = tok->decode(want);
    if (text != decoded[i].get<std::string>() && ++decode_differs <= 5) {
      ADD_FAILURE() << variant << " document " << i << " decodes to " << quoted(text) << ", transformers to "
                    << quoted(decoded[i].get<std::string>());
    }
    round_trips += text == docs[i];
    if (i > 0) stream.push_back(tok->eot_id());
    stream.insert(stream.end(), want.begin(), want.end());
  }
  ASSERT_EQ(at, want_all.size());
  EXPECT_EQ(ids_differ, 0u) << "documents whose ids differ";
  EXPECT_EQ(decode_differs, 0u) << "documents whose decoding differs";
  EXPECT_EQ(tok->decode(stream), read_file(dir / (variant + ".stream.txt"))) << "the documents joined by </s>";
  size_t samples_differ = 0;  // what a model may sample: byte tokens that are not UTF-8, <s> anywhere
  const nlohmann::json samples = nlohmann::json::parse(read_file(dir / (variant + ".random.json")));
  for (const auto& s : samples) {
    const std::string text = tok->decode(s[0].get<std::vector<int32_t>>());
    if (text != s[1].get<std::string>() && ++samples_differ <= 5) {
      ADD_FAILURE() << variant << " ids " << s[0].dump() << " decode to " << quoted(text) << ", transformers to "
                    << quoted(s[1].get<std::string>());
    }
  }
  EXPECT_EQ(samples_differ, 0u) << "random id sequences decoded otherwise";
  std::printf(
      "%s: %zu documents, %zu bytes, %zu ids: %zu with other ids, %zu decoded otherwise (and %zu of %zu "
      "random id sequences); %zu decode back to their text; hwtrain %.3f s, transformers %s s (1 thread)\n",
      variant.c_str(), docs.size(), num_bytes, want_all.size(), ids_differ, decode_differs, samples_differ,
      samples.size(), round_trips, seconds, read_file(dir / (variant + ".seconds")).c_str());

  // It travels with datasets and checkpoints as Hugging Face's two files, unchanged.
  testing::TempDir copy;
  save_tokenizer(*tok, copy.path());
  EXPECT_EQ(read_file(copy / kTokenizerJsonFile), read_file(dir / variant / kTokenizerJsonFile));
  EXPECT_EQ(read_file(copy / kTokenizerModelFile), read_file(dir / variant / kTokenizerModelFile));
  EXPECT_EQ(load_tokenizer(copy.path())->name(), tok->name());
}

// prepare --tokenizer DIR over the documents (JSONL): train and validation hold transformers' ids of
// the documents and one </s> between consecutive documents of a split, nothing else (prepare leaves
// out blank documents).
void expect_prepare_writes_transformers_ids(const fs::path& dir) {
  testing::TempDir out;
  PrepareOptions o;
  o.tokenizer = (dir / "llama2").string();
  o.val_fraction = 0.1;
  o.max_document_bytes = 0;
  o.progress = false;
  const PrepareStats st = prepare({dir / "docs.jsonl"}, out / "ds", o);
  const std::vector<std::string>& docs = spm_documents();
  const auto num_kept = std::count_if(docs.begin(), docs.end(), [](const std::string& d) { return !is_blank(d); });
  ASSERT_EQ(st.num_documents, num_kept);
  ShardedDataset ds(out / "ds");
  EXPECT_EQ(read_file(out / "ds" / kTokenizerJsonFile), read_file(dir / "llama2" / kTokenizerJsonFile));
  EXPECT_EQ(dataset_tokenizer(ds, o.tokenizer)->name(), make_tokenizer(o.tokenizer)->name());
  std::map<int64_t, int64_t> got, want;
  for (const auto& seq : {ds.train(), ds.val()}) {
    for (const int64_t id : testing::to_vector(seq)) ++got[id];
  }
  const std::vector<int32_t> ids = read_spm_int32s(dir / "llama2.ids");
  const std::vector<int32_t> lengths = read_spm_int32s(dir / "llama2.lengths");
  for (size_t i = 0, at = 0; i < docs.size(); at += static_cast<size_t>(lengths[i++])) {
    if (is_blank(docs[i])) continue;
    for (size_t k = at; k < at + static_cast<size_t>(lengths[i]); ++k) ++want[ids[k]];
  }
  want[2] += st.num_train_documents - 1 + st.num_val_documents - 1;
  EXPECT_TRUE(got == want) << "the dataset's ids, counted, differ from transformers' and the separators";
}

// One test, so that the reference is made once per process (ctest runs each test in its own).
TEST(HfSentencePiece, IdsDecodingAndPreparedDataEqualTransformers) {
  if (spm_reference_dir().empty()) GTEST_SKIP() << kNoSpmReference;
  const fs::path dir(spm_reference_dir());
  for (const char* variant : {"llama2", "metaspace", "noprefix"}) expect_variant_equals_transformers(dir, variant);
  expect_prepare_writes_transformers_ids(dir);
}

}  // namespace
}  // namespace hwt
