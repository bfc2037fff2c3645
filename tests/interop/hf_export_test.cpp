// Exporting to a Hugging Face model directory: transformers' AutoModelForCausalLM loads what
// export_hf wrote (Llama with GQA and llama3 rope scaling in shards; Qwen2 with q/k/v biases and a
// tied head; GPT-2 with its Conv1D layout) and gives hwtrain's logits; reading it back gives the
// same tensors; a taken output directory and a GPT-2 without biases are refused by name.
#include "hwtrain/interop/hf_export.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/interop/hf_directory.h"
#include "hwtrain/io/safetensors.h"
#include "interop/reference_dir.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

ModelConfig tiny(bool qwen2) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = qwen2 ? 1 : 2;
  c.n_embd = 64;
  c.block_size = 32;
  c.vocab_size = 80;
  c.intermediate_size = 96;
  c.bias = qwen2;
  c.tie_word_embeddings = qwen2;
  c.rope_theta = qwen2 ? 1e6 : 500000.0;
  c.rms_norm_eps = qwen2 ? 1e-6 : 1e-5;
  if (!qwen2) {
    c.rope_scaling = RopeScaling::kLlama3;
    c.rope_original_max_positions = 16;
  }
  return c;
}

std::vector<std::pair<std::string, torch::Tensor>> named(GPT& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model->named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

TEST(HfExport, TransformersLoadsItAndGivesTheSameLogits) {
  if (testing::hf_reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no transformers";
  testing::TempDir dir;
  for (int family = 0; family < 3; ++family) {
    const bool qwen2 = family == 1;
    ModelConfig m = tiny(qwen2);
    if (family == 2) {  // GPT-2 with the tanh GELU (gelu_new)
      m = ModelConfig{};
      m.n_layer = 2;
      m.n_head = 4;
      m.n_embd = 64;
      m.block_size = 32;
      m.vocab_size = 80;
      m.activation = Activation::kGeluTanh;
    }
    torch::manual_seed(3);
    GPT model(m, m.vocab_size);
    {
      torch::NoGradGuard no_grad;  // norms and biases away from their initial ones and zeros
      for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.1);
    }
    const std::string label = family == 0 ? "llama" : family == 1 ? "qwen2" : "gpt2";
    const fs::path out = dir / label;
    HfExportOptions o;
    o.max_shard_bytes = family == 0 ? 40'000 : 5'000'000'000;
    export_hf(m, named(model), out, o);
    EXPECT_EQ(fs::exists(out / "model.safetensors.index.json"), family == 0);
    const auto ids = torch::randint(m.vocab_size, {2, 20});
    save_safetensors(dir / "ids.safetensors", {{"ids", ids}});
    const std::string cmd = std::string(HWTRAIN_PYTHON) + " " + HWTRAIN_SOURCE_DIR +
                            "/tests/interop/reference/hf_load_and_run.py '" + out.string() + "' '" +
                            (dir / "ids.safetensors").string() + "' '" + (dir / "logits.safetensors").string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    model->eval();
    torch::NoGradGuard no_grad;
    const auto theirs = load_safetensors(dir / "logits.safetensors").get("logits");
    EXPECT_LT((model->forward(ids) - theirs).abs().max().item<double>(), 1e-4) << label;
  }
}

TEST(HfExport, ReadsBackAsWrittenInEveryDtype) {
  testing::TempDir dir;
  const ModelConfig m = tiny(false);
  GPT model(m, m.vocab_size);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    const fs::path out = dir / c10::toString(dtype);
    HfExportOptions o;
    o.dtype = dtype;
    o.max_shard_bytes = 30'000;
    export_hf(m, named(model), out, o);
    ModelConfig base;
    base.block_size = m.block_size;
    const ModelConfig back = read_hf_model_config(out, base);
    EXPECT_EQ(back.n_kv_head, m.n_kv_head);
    EXPECT_EQ(back.rope_scaling, RopeScaling::kLlama3);
    EXPECT_EQ(back.intermediate_size, m.intermediate_size);
    const auto weights = read_hf_weights(out);
    EXPECT_EQ(weights.size(), model->named_parameters().size());
    auto params = model->named_parameters();
    for (const auto& [hf_name, t] : weights) {
      EXPECT_EQ(t.scalar_type(), dtype) << hf_name;
      const std::string name = hf_name == "lm_head.weight" ? hf_name : hf_name.substr(6);
      EXPECT_TRUE(torch::equal(t, params[name].to(dtype))) << hf_name;
    }
  }
}

// The tokenizer's end-of-text id goes into config.json (GPT-2's bos too), so that transformers'
// generate() stops where the run's text ends; a weight fp16 cannot hold is refused by name.
TEST(HfExport, WritesTheEndOfTextIdAndRefusesAnFp16Overflow) {
  testing::TempDir dir;
  ModelConfig g;
  g.vocab_size = 64;
  g.n_layer = 1;
  g.n_head = 2;
  g.n_embd = 16;
  g.block_size = 8;
  GPT gpt(g, 64);
  HfExportOptions o;
  o.eos_token_id = 63;
  export_hf(g, named(gpt), dir / "gpt", o);
  const auto config = nlohmann::json::parse(read_file(dir / "gpt" / "config.json"));
  EXPECT_EQ(config.at("eos_token_id"), 63);
  EXPECT_EQ(config.at("bos_token_id"), 63);
  {
    torch::NoGradGuard no_grad;
    gpt->named_parameters()["h.0.mlp.c_fc.weight"].fill_(1e5);  // above fp16's 65504
  }
  o.dtype = torch::kFloat16;
  try {
    export_hf(g, named(gpt), dir / "fp16", o);
    FAIL() << "an fp16 export of 1e5 was written";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'h.0.mlp.c_fc.weight'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "fp16"));
}

TEST(HfExport, RefusesATakenDirectoryAndGpt2WithoutBiases) {
  testing::TempDir dir;
  const ModelConfig m = tiny(false);
  GPT model(m, m.vocab_size);
  dir.write("taken/file", "x");
  EXPECT_THROW(export_hf(m, named(model), dir / "taken"), IoError);
  EXPECT_TRUE(fs::exists(dir / "taken" / "file"));
  ModelConfig g;
  g.vocab_size = 64;
  g.bias = false;  // Hugging Face's GPT-2 always has biases
  GPT gpt(g, 64);
  EXPECT_THROW(export_hf(g, named(gpt), dir / "gpt"), ConfigError);
  EXPECT_FALSE(fs::exists(dir / "gpt"));
  // "out/" (as typed with a shell's completion) names the directory out, an empty one included;
  // a user's "out.partial" is not the staging directory's.
  dir.write("out.partial/mine", "x");
  fs::create_directories(dir / "empty");
  for (const std::string name : {"out/", "empty/"}) {
    export_hf(m, named(model), (dir / name).string());
    EXPECT_TRUE(fs::exists(dir / name / "config.json")) << name;
  }
  EXPECT_TRUE(fs::exists(dir / "out.partial" / "mine"));
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".partial-"), std::string::npos) << entry.path();
  }
}

// A killed export's staging directory (its process gone, an hour old) is removed by the next export
// to the same name; a recent one (perhaps another host's, on a shared file system) is left.
TEST(HfExport, RemovesAKilledExportsStagingDirectory) {
  testing::TempDir dir;
  const ModelConfig m = tiny(false);
  GPT model(m, m.vocab_size);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // its pid names no process now
  const std::string dead = std::to_string(child);
  dir.write(".out.partial-" + dead + "/model.safetensors", "half");
  dir.write(".out.partial-" + dead + "0/model.safetensors", "half");  // recent
  dir.write(".other.partial-" + dead + "/x", "x");                    // another export's
  for (const std::string name : {".out.partial-" + dead, ".other.partial-" + dead}) {
    fs::last_write_time(dir / name, fs::file_time_type::clock::now() - std::chrono::hours(2));
  }
  export_hf(m, named(model), dir / "out");
  EXPECT_TRUE(fs::exists(dir / "out" / "config.json"));
  EXPECT_FALSE(fs::exists(dir / (".out.partial-" + dead)));
  EXPECT_TRUE(fs::exists(dir / (".out.partial-" + dead + "0")));
  EXPECT_TRUE(fs::exists(dir / (".other.partial-" + dead)));
}

}  // namespace
}  // namespace hwt
