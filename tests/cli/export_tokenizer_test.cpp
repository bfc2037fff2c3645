// A run trained with a Hugging Face tokenizer.json (GPT-2 style, trained by the tokenizers library)
// exports with it: transformers' AutoTokenizer and AutoModelForCausalLM load the exported
// directory, and the tokenizer gives the ids the original tokenizer.json gives; hwtrain generate
// and eval read the exported directory with the run's results.
#include <gtest/gtest.h>

#include "hwtrain/core/files.h"
#include "support/python_reference.h"
#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

// In `dir` (holding corpus/ and the tokenizer directory): prepares the corpus with the tokenizer,
// trains the tiny model 2 steps on it (run/) and exports the run (exported/, its log e.log).
void train_and_export(const testing::TempDir& dir, const std::string& tokenizer) {
  const std::string cd = "cd '" + dir.path().string() + "' && ";
  const std::string bin = HWTRAIN_BINARY;
  ASSERT_EQ(testing::run_shell(cd + bin + " prepare corpus --separator % --tokenizer " + tokenizer +
                               " -o data.hwt > p.log 2>&1"),
            0)
      << testing::read_text(dir / "p.log");
  ASSERT_EQ(testing::run_shell(cd + bin + " train --data data.hwt --set data.tokenizer=" + tokenizer +
                               " --set model.preset=tiny --set train.max_steps=2 --set train.eval_interval=0 "
                               "--set train.sample_tokens=0 --set log.report=false --set log.tensorboard=false "
                               "--set train.time_budget=0 --set optimization.intra_op_threads=1 --out run > t.log 2>&1"),
            0)
      << testing::read_text(dir / "t.log");
  ASSERT_EQ(testing::run_shell(cd + bin + " export run --format hf -o exported > e.log 2>&1"), 0)
      << testing::read_text(dir / "e.log");
}

TEST(ExportTokenizer, TransformersLoadsTheRunsTokenizerAndModel) {
  const std::string py = HWTRAIN_PYTHON;
  if (testing::run_shell(py + " -c 'import transformers, tokenizers' 2>/dev/null") != 0) {
    GTEST_SKIP() << py << " has no transformers";
  }
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string cd = "cd '" + dir.path().string() + "' && ";
  const std::string bin = HWTRAIN_BINARY;
  const std::string ref =
      testing::python_reference("transformers, tokenizers", "data/reference/hf_tokenizers_reference.py", "3");
  ASSERT_FALSE(ref.empty()) << "tests/data/reference/hf_tokenizers_reference.py failed";
  std::filesystem::create_directories(dir / "tokref");
  std::filesystem::copy(std::filesystem::path(ref) / "gpt2", dir / "tokref" / "gpt2");
  train_and_export(dir, "tokref/gpt2");
  if (HasFatalFailure()) return;
  EXPECT_NE(testing::read_text(dir / "e.log").find("tokenizer.json"), std::string::npos);
  EXPECT_EQ(read_file(dir / "exported" / "tokenizer.json"), read_file(dir / "tokref" / "gpt2" / "tokenizer.json"));
  const std::string check =
      "import tokenizers, transformers\n"
      "t = transformers.AutoTokenizer.from_pretrained('exported')\n"
      "ref = tokenizers.Tokenizer.from_file('tokref/gpt2/tokenizer.json')\n"
      "s = \"Don't panic: 42 caf\\u00e9s, \\u6771\\u4eac  <|endoftext|>\\n\\n  done\"\n"
      "assert t.encode(s) == ref.encode(s).ids, (t.encode(s), ref.encode(s).ids)\n"
      "transformers.AutoModelForCausalLM.from_pretrained('exported')\n";
  dir.write("check.py", check);
  EXPECT_EQ(testing::run_shell(cd + py + " check.py > c.log 2>&1"), 0) << testing::read_text(dir / "c.log");

  // hwtrain generate and eval read the exported directory as they read the run. eval plans its own
  // precision from a GEMM probe, which a loaded machine can tip to fp32 for one and bf16 for the
  // other: both evals are pinned (fp32, batch, threads), so only the weights they read can differ.
  const std::string fp32 = " --set optimization.mixed_precision_dtype=fp32 --set train.micro_batch_size=4"
                           " --set optimization.intra_op_threads=1";
  for (const char* from : {"run", "exported"}) {
    ASSERT_EQ(testing::run_shell(cd + bin + " generate " + from + " --prompt 'The quick' -n 12 --temperature 0 > g-" +
                                 from + ".txt 2> g-" + from + ".log"),
              0)
        << testing::read_text(dir / ("g-" + std::string(from) + ".log"));
    ASSERT_EQ(testing::run_shell(cd + bin + " eval " + from + fp32 + " --data data.hwt --set data.tokenizer=tokref/gpt2 > v-" +
                                 from + ".txt 2>&1"),
              0)
        << testing::read_text(dir / ("v-" + std::string(from) + ".txt"));
  }
  EXPECT_EQ(testing::read_text(dir / "g-run.txt"), testing::read_text(dir / "g-exported.txt"));
  const std::string v_run = testing::read_text(dir / "v-run.txt"), v_hf = testing::read_text(dir / "v-exported.txt");
  EXPECT_EQ(v_run.substr(v_run.find("val_loss")), v_hf.substr(v_hf.find("val_loss")));
  // Perplexity of a plain text file, tokenized with the directory's own tokenizer.json.
  ASSERT_EQ(testing::run_shell(cd + bin + " eval exported --data corpus/a.txt --set data.document_separator=% > v-text.txt 2>&1"),
            0)
      << testing::read_text(dir / "v-text.txt");
  EXPECT_NE(testing::read_text(dir / "v-text.txt").find("val_perplexity"), std::string::npos);
}

// The Llama 2 form (a SentencePiece tokenizer.model with the tokenizer.json transformers converted
// from it): the export carries both files unchanged, transformers' AutoTokenizer loads the exported
// directory with the ids of the original one, and eval gives a text file's perplexity through it.
TEST(ExportTokenizer, ALlamaTwoFormRunExportsBothTokenizerFiles) {
  const std::string py = HWTRAIN_PYTHON;
  if (testing::run_shell(py + " -c 'import transformers, sentencepiece, google.protobuf' 2>/dev/null") != 0) {
    GTEST_SKIP() << py << " has no transformers, sentencepiece or protobuf";
  }
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  const std::string cd = "cd '" + dir.path().string() + "' && ";
  const std::string ref = testing::python_reference("transformers,sentencepiece,google.protobuf",
                                                     "data/reference/hf_sentencepiece_reference.py", "");
  ASSERT_FALSE(ref.empty()) << "tests/data/reference/hf_sentencepiece_reference.py failed";
  std::filesystem::create_directories(dir / "spref");
  std::filesystem::copy(std::filesystem::path(ref) / "llama2", dir / "spref" / "llama2");
  train_and_export(dir, "spref/llama2");
  if (HasFatalFailure()) return;
  EXPECT_NE(testing::read_text(dir / "e.log").find("tokenizer.json and tokenizer.model"), std::string::npos)
      << testing::read_text(dir / "e.log");
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    EXPECT_EQ(read_file(dir / "exported" / name), read_file(dir / "spref" / "llama2" / name)) << name;
  }
  const std::string check =
      "import transformers\n"
      "t = transformers.AutoTokenizer.from_pretrained('exported')\n"
      "ref = transformers.AutoTokenizer.from_pretrained('spref/llama2')\n"
      "s = \"Don't panic: 42 caf\\u00e9s, \\u6771\\u4eac  </s>\\n\\n  done <s> x\"\n"
      "assert t.encode(s) == ref.encode(s), (t.encode(s), ref.encode(s))\n"
      "assert t.decode(t.encode(s)) == ref.decode(ref.encode(s))\n";
  dir.write("check.py", check);
  EXPECT_EQ(testing::run_shell(cd + py + " check.py > c.log 2>&1"), 0) << testing::read_text(dir / "c.log");
  // Perplexity of a plain text file through the directory's SentencePiece tokenizer: the same as
  // naming the directory as data.tokenizer; the text's bytes are refused, naming both tokenizers.
  // Pinned as above: a loaded machine's GEMM probe could plan the evals differently.
  const std::string pinned = " --set optimization.mixed_precision_dtype=fp32 --set train.micro_batch_size=4"
                             " --set optimization.intra_op_threads=1 --set data.document_separator=% ";
  auto eval = [&](const std::string& tokenizer, const std::string& out) {
    return testing::run_shell(cd + HWTRAIN_BINARY + " eval exported --data corpus/a.txt" + pinned + tokenizer + " > " +
                              out + " 2>&1");
  };
  auto val_line = [&](const std::string& out) {
    const std::string v = testing::read_text(dir / out);
    return v.find("val_perplexity") == std::string::npos ? v : v.substr(v.find("val_loss"));
  };
  ASSERT_EQ(eval("", "v-own.txt"), 0) << testing::read_text(dir / "v-own.txt");
  ASSERT_EQ(eval("--set data.tokenizer=exported", "v-named.txt"), 0) << testing::read_text(dir / "v-named.txt");
  EXPECT_NE(val_line("v-own.txt").find("val_perplexity"), std::string::npos) << val_line("v-own.txt");
  EXPECT_EQ(val_line("v-own.txt"), val_line("v-named.txt"));
  EXPECT_NE(eval("--set data.tokenizer=byte", "v-byte.txt"), 0);
  EXPECT_NE(testing::read_text(dir / "v-byte.txt").find("trained with tokenizer 'hf-spm:"), std::string::npos)
      << testing::read_text(dir / "v-byte.txt");
  // The same directory with its tokenizer.model alone: eval and generate use it as SentencePiece
  // encodes, as data.tokenizer = that .model file does.
  std::filesystem::copy(dir / "exported", dir / "modelonly");
  std::filesystem::remove(dir / "modelonly" / "tokenizer.json");
  ASSERT_EQ(testing::run_shell(cd + HWTRAIN_BINARY + " eval modelonly --data corpus/a.txt" + pinned + "> v-modelonly.txt 2>&1"),
            0)
      << testing::read_text(dir / "v-modelonly.txt");
  ASSERT_EQ(testing::run_shell(cd + HWTRAIN_BINARY + " eval modelonly --data corpus/a.txt" + pinned +
                               "--set data.tokenizer=modelonly/tokenizer.model > v-spm.txt 2>&1"),
            0)
      << testing::read_text(dir / "v-spm.txt");
  EXPECT_EQ(val_line("v-modelonly.txt"), val_line("v-spm.txt"));
  EXPECT_EQ(testing::run_shell(cd + HWTRAIN_BINARY + " generate modelonly --prompt 'The quick' -n 4 > g-modelonly.txt 2>&1"),
            0)
      << testing::read_text(dir / "g-modelonly.txt");
}

}  // namespace
}  // namespace hwt
