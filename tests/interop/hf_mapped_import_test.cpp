// Importing a Hugging Face directory through memory-mapped shards (issue 17): bf16, fp16 and fp32
// shards land in an fp32 model converted, the parameters are the model's own writable memory (never views of the
// read-only mapping), read_hf_weights gives writable copies, and a damaged shard is refused with
// load_safetensors' message naming that shard, as is a tensor of the wrong shape or dtype.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
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

// Writes `model`'s weights as a Hugging Face directory in `dtype` (bf16 by default), split over two
// shards by an index; `edit` may change a tensor (by its Hugging Face name) before it is written.
void write_bf16_directory(GPT& model, const fs::path& dir, torch::Dtype dtype = torch::kBFloat16,
                          const std::function<void(const std::string&, torch::Tensor&)>& edit = {}) {
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
    torch::Tensor t = p.value().detach().to(dtype);
    if (edit) edit(hf_name, t);
    shards[i++ % 2].emplace_back(hf_name, t);
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

// fp16 and fp32 shards load too, each value exactly as stored.
TEST(HfMappedImport, Fp16AndFp32ShardsLoadAsStored) {
  for (const torch::Dtype dtype : {torch::kHalf, torch::kFloat32}) {
    testing::TempDir tmp;
    torch::manual_seed(1);
    GPT source(tiny_llama(), 64);
    write_bf16_directory(source, tmp.path(), dtype);
    GPT model(read_hf_model_config(tmp.path(), tiny_llama()), 64);
    load_hf_directory_weights(model, tmp.path());
    torch::NoGradGuard no_grad;
    const auto expected = source->named_parameters();
    for (const auto& p : model->named_parameters()) {
      EXPECT_TRUE(torch::equal(p.value(), expected[p.key()].to(dtype).to(torch::kFloat32))) << p.key() << " " << dtype;
    }
  }
}

// A tensor of the wrong shape or of an integer dtype is refused naming its shard and its name.
TEST(HfMappedImport, AWrongShapeOrDtypeIsNamedWithItsShard) {
  const std::string victim = "model.layers.1.mlp.down_proj.weight";
  struct Case {
    const char* what;
    std::function<void(torch::Tensor&)> edit;
    const char* says;
  };
  const Case cases[] = {{"shape", [](torch::Tensor& t) { t = t.narrow(0, 0, t.size(0) - 1).contiguous(); }, "has shape"},
                        {"dtype", [](torch::Tensor& t) { t = t.to(torch::kInt32); }, "has dtype Int"}};
  for (const Case& c : cases) {
    testing::TempDir tmp;
    GPT source(tiny_llama(), 64);
    write_bf16_directory(source, tmp.path(), torch::kBFloat16, [&](const std::string& name, torch::Tensor& t) {
      if (name == victim) c.edit(t);
    });
    GPT model(tiny_llama(), 64);
    const std::string error = testing::error_of<IoError>([&] { load_hf_directory_weights(model, tmp.path()); });
    EXPECT_NE(error.find((tmp.path() / "model-0000").string()), std::string::npos) << c.what << ": " << error;
    EXPECT_NE(error.find("'" + victim + "'"), std::string::npos) << c.what << ": " << error;
    EXPECT_NE(error.find(c.says), std::string::npos) << c.what << ": " << error;
  }
}

}  // namespace
}  // namespace hwt
