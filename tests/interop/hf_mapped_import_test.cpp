// Importing a Hugging Face directory through memory-mapped shards (issue 17): bf16 shards land in
// an fp32 model converted, the parameters are the model's own writable memory (never views of the
// read-only mapping), read_hf_weights gives writable copies, and a damaged shard is refused with
// load_safetensors' message naming that shard.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/interop/hf_directory.h"
#include "hwtrain/interop/hf_weights.h"
#include "hwtrain/io/safetensors.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

ModelConfig tiny_llama() {
  ModelConfig m;
  m.architecture = Architecture::kLlama;
  m.n_embd = 32;
  m.n_layer = 2;
  m.n_head = 4;
  m.n_kv_head = 2;
  m.intermediate_size = 64;
  m.vocab_size = 64;
  m.block_size = 16;
  m.dropout = 0;
  m.bias = false;
  m.tie_word_embeddings = false;
  m.rms_norm_eps = 1e-5;
  return m;
}

// Writes `model`'s weights as a Hugging Face directory in bf16, split over two shards by an index.
void write_bf16_directory(GPT& model, const fs::path& dir) {
  const nlohmann::json config = {{"model_type", "llama"}, {"hidden_size", 32}, {"num_hidden_layers", 2},
                                 {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 64},
                                 {"vocab_size", 64}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}};
  std::ofstream(dir / "config.json") << config.dump();
  NamedTensors shards[2];
  nlohmann::json weight_map = nlohmann::json::object();
  int i = 0;
  for (const auto& p : model->named_parameters()) {
    const std::string hf_name = hf_name_from_hwtrain(model->config(), p.key());
    const std::string shard = i % 2 == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    shards[i++ % 2].emplace_back(hf_name, p.value().detach().to(torch::kBFloat16));
    weight_map[hf_name] = shard;
  }
  save_safetensors(dir / "model-00001-of-00002.safetensors", shards[0]);
  save_safetensors(dir / "model-00002-of-00002.safetensors", shards[1]);
  std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"weight_map", weight_map}}.dump();
}

TEST(HfMappedImport, Bf16ShardsLoadIntoTheModelsOwnMemory) {
  testing::TempDir tmp;
  torch::manual_seed(0);
  GPT source(tiny_llama(), 64);
  write_bf16_directory(source, tmp.path());

  GPT model(read_hf_model_config(tmp.path(), tiny_llama()), 64);
  load_hf_directory_weights(model, tmp.path());
  torch::NoGradGuard no_grad;
  const auto expected = source->named_parameters();
  for (const auto& p : model->named_parameters()) {
    EXPECT_EQ(p.value().scalar_type(), torch::kFloat32) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), expected[p.key()].to(torch::kBFloat16).to(torch::kFloat32))) << p.key();
    p.value().add_(1);  // the model's memory: writable (a view of the mapping would fault here)
  }
  for (auto& [name, t] : read_hf_weights(tmp.path())) {
    EXPECT_EQ(t.scalar_type(), torch::kBFloat16) << name;
    t.mul_(2);  // owned copies, writable too
  }
}

TEST(HfMappedImport, ADamagedShardIsRefusedByName) {
  testing::TempDir tmp;
  torch::manual_seed(0);
  GPT source(tiny_llama(), 64);
  write_bf16_directory(source, tmp.path());
  const fs::path shard = tmp.path() / "model-00002-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 3);  // truncated
  GPT model(tiny_llama(), 64);
  const std::string error = testing::error_of<IoError>([&] { load_hf_directory_weights(model, tmp.path()); });
  EXPECT_NE(error.find(shard.string()), std::string::npos) << error;
  EXPECT_NE(error.find("beyond the data section"), std::string::npos) << error;
  EXPECT_EQ(error, testing::error_of<IoError>([&] { load_safetensors(shard); }));
}

}  // namespace
}  // namespace hwt
