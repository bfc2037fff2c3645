// Reading a Hugging Face model directory: config.json onto ModelConfig, the weights from sharded
// safetensors through the index; the model so built gives transformers' logits. Bad directories
// are named: unsupported model_type or rope scaling, a missing shard, a shard outside the
// directory, a missing key.
#include "hwtrain/interop/hf_directory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "support/error_of.h"
#include "hwtrain/core/files.h"
#include "hwtrain/interop/hf_weights.h"
#include "hwtrain/io/safetensors.h"
#include "interop/reference_dir.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

using testing::error_of;

TEST(HfDirectory, ShardedLlamaLoadsAndGivesTransformersLogits) {
  if (testing::hf_reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no transformers";
  const fs::path dir = fs::path(testing::hf_reference_dir()) / "llama_gqa_rope3_hf";
  ModelConfig base;
  base.block_size = 32;
  const ModelConfig m = read_hf_model_config(dir, base);
  EXPECT_EQ(m.architecture, Architecture::kLlama);
  EXPECT_EQ(m.n_kv_head, 2);
  EXPECT_EQ(m.intermediate_size, 160);
  EXPECT_EQ(m.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(m.rope_original_max_positions, 16);
  EXPECT_EQ(m.block_size, 32);  // the training context stays the run's
  GPT model(m, m.vocab_size);
  load_hf_directory_weights(model, dir);  // shard by shard
  const SafetensorsFile ref = load_safetensors(fs::path(testing::hf_reference_dir()) / "llama_gqa_rope3.safetensors");
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_LT((model->forward(ref.get("ref.ids")) - ref.get("ref.logits")).abs().max().item<double>(), 1e-4);
}

// A Hugging Face hub snapshot: every file a link into the cache's blobs/ (as huggingface_hub lays
// out ~/.cache/huggingface/hub/models--*/snapshots/<revision>/).
TEST(HfDirectory, AHubSnapshotOfLinksLoads) {
  if (testing::hf_reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no transformers";
  const fs::path dir = fs::path(testing::hf_reference_dir()) / "llama_gqa_rope3_hf";
  testing::TempDir hub;
  fs::create_directories(hub / "blobs");
  fs::create_directories(hub / "snapshots" / "rev");
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string blob = "blob" + std::to_string(n++);
    fs::copy_file(entry.path(), hub / "blobs" / blob);
    fs::create_symlink(fs::path("..") / ".." / "blobs" / blob, hub / "snapshots" / "rev" / entry.path().filename());
  }
  const fs::path snapshot = hub / "snapshots" / "rev";
  ModelConfig base;
  base.block_size = 32;
  const ModelConfig m = read_hf_model_config(snapshot, base);
  GPT model(m, m.vocab_size);
  load_hf_directory_weights(model, snapshot);
  const SafetensorsFile ref = load_safetensors(fs::path(testing::hf_reference_dir()) / "llama_gqa_rope3.safetensors");
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_LT((model->forward(ref.get("ref.ids")) - ref.get("ref.logits")).abs().max().item<double>(), 1e-4);
}

TEST(HfDirectory, Gpt2LoadsWithItsConv1DLayoutAndShorterContext) {
  if (testing::hf_reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no transformers";
  const fs::path dir = fs::path(testing::hf_reference_dir()) / "gpt2_hf";
  ModelConfig base;
  base.block_size = 24;  // of its 32 positions
  const ModelConfig m = read_hf_model_config(dir, base);
  EXPECT_EQ(m.architecture, Architecture::kGpt2);
  EXPECT_EQ(m.activation, Activation::kGeluTanh);
  GPT model(m, m.vocab_size);
  load_hf_weights(model, read_hf_weights(dir), dir.string());
  const SafetensorsFile ref = load_safetensors(fs::path(testing::hf_reference_dir()) / "gpt2.safetensors");
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_LT((model->forward(ref.get("ref.ids")) - ref.get("ref.logits")).abs().max().item<double>(), 1e-4);
  // GPT2Model's names, as the Hub's own gpt2 files have them: the same weights without "transformer.".
  std::vector<std::pair<std::string, torch::Tensor>> bare;
  for (const auto& [name, t] : read_hf_weights(dir)) {
    bare.emplace_back(name.rfind("transformer.", 0) == 0 ? name.substr(12) : name, t);
  }
  GPT again(m, m.vocab_size);
  load_hf_weights(again, bare, "bare names");
  again->eval();
  EXPECT_LT((again->forward(ref.get("ref.ids")) - ref.get("ref.logits")).abs().max().item<double>(), 1e-4);
  bare.push_back(read_hf_weights(dir).front());  // both forms of one tensor: refused
  GPT mixed(m, m.vocab_size);
  EXPECT_NE(error_of<IoError>([&] { load_hf_weights(mixed, bare, "mixed"); }).find("is given twice"),
            std::string::npos);
  base.block_size = 64;
  EXPECT_THROW(read_hf_model_config(dir, base), ConfigError);  // beyond its learned positions
  // An untied head cannot be GPT-2's here: refused, not dropped.
  testing::TempDir untied;
  nlohmann::json config = nlohmann::json::parse(read_file(dir / "config.json"));
  config["tie_word_embeddings"] = false;
  untied.write("config.json", config.dump());
  base.block_size = 24;
  EXPECT_NE(
      error_of<ConfigError>([&] { read_hf_model_config(untied.path(), base); }).find("tie_word_embeddings = false"),
      std::string::npos);
}

// The MHA Llama and Qwen2 (q/k/v biases, tied head, one KV head, eps 1e-6) as transformers saved
// them: config.json read onto ModelConfig gives transformers' logits, as --init-from reads them.
TEST(HfDirectory, MhaLlamaAndQwen2LoadThroughTheirConfigJson) {
  if (testing::hf_reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no transformers";
  for (const std::string name : {"llama_mha", "qwen2"}) {
    const fs::path dir = fs::path(testing::hf_reference_dir()) / (name + "_hf");
    ModelConfig base;
    base.block_size = 32;
    const ModelConfig m = read_hf_model_config(dir, base);
    EXPECT_EQ(m.architecture, Architecture::kLlama) << name;
    const bool qwen = name == "qwen2";
    EXPECT_EQ(m.n_kv_head, qwen ? 1 : 4) << name;
    EXPECT_EQ(m.tie_word_embeddings, qwen) << name;
    EXPECT_EQ(m.bias, qwen) << name;  // the llama family's bias: q/k/v biases
    EXPECT_DOUBLE_EQ(m.rms_norm_eps, qwen ? 1e-6 : 1e-5) << name;
    EXPECT_DOUBLE_EQ(m.rope_theta, qwen ? 1e6 : 1e4) << name;
    GPT model(m, m.vocab_size);
    load_hf_directory_weights(model, dir);
    const SafetensorsFile ref = load_safetensors(fs::path(testing::hf_reference_dir()) / (name + ".safetensors"));
    model->eval();
    torch::NoGradGuard no_grad;
    EXPECT_LT((model->forward(ref.get("ref.ids")) - ref.get("ref.logits")).abs().max().item<double>(), 1e-4) << name;
  }
}

struct Dir {
  testing::TempDir tmp;
  nlohmann::json config = {{"model_type", "llama"}, {"hidden_size", 32}, {"num_hidden_layers", 1},
                           {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 64},
                           {"vocab_size", 64}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}};
  fs::path write() {
    tmp.write("config.json", config.dump());
    return tmp.path();
  }
};

TEST(HfDirectory, ConfigErrorsNameTheFileAndKey) {
  Dir d;
  EXPECT_EQ(read_hf_model_config(d.write(), {}).n_kv_head, 2);
  d.config["model_type"] = "gpt_neox";
  EXPECT_NE(error_of<ConfigError>([&] { read_hf_model_config(d.write(), {}); }).find("model_type = 'gpt_neox'"),
            std::string::npos);
  d.config["model_type"] = "llama";
  d.config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(error_of<ConfigError>([&] { read_hf_model_config(d.write(), {}); }).find("rope_scaling.rope_type = 'yarn'"),
            std::string::npos);
  d.config.erase("rope_scaling");
  d.config.erase("hidden_size");
  const std::string missing = error_of<IoError>([&] { read_hf_model_config(d.write(), {}); });
  EXPECT_NE(missing.find("config.json: key 'hidden_size' is missing"), std::string::npos) << missing;
  d.config["hidden_size"] = "wide";
  EXPECT_NE(error_of<IoError>([&] { read_hf_model_config(d.write(), {}); }).find("'hidden_size' has the wrong type"),
            std::string::npos);
  d.config["hidden_size"] = 5.55556e+36;  // a float where an integer belongs: refused, not converted (fuzz finding)
  const std::string real = error_of<IoError>([&] { read_hf_model_config(d.write(), {}); });
  EXPECT_NE(real.find("'hidden_size' has the wrong type (5.55556e+36): expected an integer"), std::string::npos) << real;
  d.config["hidden_size"] = 32.0;
  EXPECT_THROW(read_hf_model_config(d.write(), {}), IoError);
  d.config["hidden_size"] = 32;
  d.config["num_key_value_heads"] = 3;  // does not divide 4 heads
  EXPECT_NE(error_of<ConfigError>([&] { read_hf_model_config(d.write(), {}); }).find("cannot build"), std::string::npos);
}

// A directory that is not a Hugging Face model says what it is instead, in one line: missing, a file,
// a hwtrain checkpoint or run directory (with the commands that take those), or without config.json.
TEST(HfDirectory, WhatIsNotAModelDirectoryIsNamed) {
  testing::TempDir tmp;
  auto error = [&](const std::string& name) {
    return error_of<IoError>([&] { read_hf_model_config(tmp.path() / name, {}); });
  };
  EXPECT_NE(error("nowhere").find("nowhere: no such directory: expected a Hugging Face model directory"),
            std::string::npos);
  tmp.write("file.txt", "x");
  EXPECT_NE(error("file.txt").find("file.txt is not a directory"), std::string::npos);
  tmp.write("run/config.toml", "");
  fs::create_directories(tmp.path() / "run" / "checkpoints");
  tmp.write("ckpt/config.toml", "");
  tmp.write("ckpt/COMPLETE", "{}");
  EXPECT_NE(error("run").find("is a hwtrain run directory, not a Hugging Face model directory: `hwtrain train "
                              "--resume"),
            std::string::npos)
      << error("run");
  EXPECT_NE(error("ckpt").find("is a hwtrain checkpoint"), std::string::npos);
  EXPECT_NE(error("ckpt").find("`hwtrain export "), std::string::npos);
  tmp.write("other/model.safetensors", "");
  EXPECT_NE(error("other").find("other has no config.json"), std::string::npos);
}

TEST(HfDirectory, ShardsAreCheckedAgainstTheIndex) {
  Dir d;
  const fs::path dir = d.write();
  EXPECT_NE(error_of<IoError>([&] { read_hf_weights(dir); }).find("neither model.safetensors"), std::string::npos);
  save_safetensors(dir / "model-00001-of-00002.safetensors", {{"model.norm.weight", torch::ones({32})}});
  nlohmann::json index = {{"weight_map",
                           {{"model.norm.weight", "model-00001-of-00002.safetensors"},
                            {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  d.tmp.write("model.safetensors.index.json", index.dump());
  EXPECT_NE(error_of<IoError>([&] { read_hf_weights(dir); }).find("lists shard model-00002-of-00002.safetensors, which is missing"),
            std::string::npos);
  index["weight_map"]["lm_head.weight"] = "../elsewhere.safetensors";
  d.tmp.write("model.safetensors.index.json", index.dump());
  EXPECT_NE(error_of<IoError>([&] { read_hf_weights(dir); }).find("must name a file in"), std::string::npos);
  index["weight_map"]["lm_head.weight"] = "model-00001-of-00002.safetensors";  // not in that shard
  d.tmp.write("model.safetensors.index.json", index.dump());
  EXPECT_NE(error_of<IoError>([&] { read_hf_weights(dir); }).find("lacks tensor 'lm_head.weight'"), std::string::npos);
  index["weight_map"].erase("lm_head.weight");
  d.tmp.write("model.safetensors.index.json", index.dump());
  EXPECT_EQ(read_hf_weights(dir).size(), 1u);
}

}  // namespace
}  // namespace hwt
