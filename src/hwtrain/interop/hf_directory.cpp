#include "hwtrain/interop/hf_directory.h"

#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/core/json_integer.h"
#include "hwtrain/interop/hf_weights.h"
#include "hwtrain/io/mapped_safetensors.h"

namespace hwt {
namespace fs = std::filesystem;
namespace {

constexpr uint64_t kMaxJsonBytes = 16ull << 20;  // config.json and the index are small

nlohmann::json read_json(const fs::path& path) {
  const std::string text = read_linked_file(path, kMaxJsonBytes);  // hub snapshots link to their blobs
  try {
    return parse_json_bounded(text);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path.string() + " is not valid JSON: " + e.what());
  }
}

template <class T>
T field(const nlohmann::json& j, const fs::path& file, const char* key, std::optional<T> fallback = std::nullopt) {
  if (!j.contains(key) || j.at(key).is_null()) {
    if (fallback) return *fallback;
    throw IoError(file.string() + ": key '" + key + "' is missing");
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // get<int64_t>() of a float such as 5e36 is undefined behaviour: accept JSON integers only.
    if (!is_json_integer_in(j.at(key), std::numeric_limits<T>::min(), std::numeric_limits<T>::max())) {
      throw IoError(file.string() + ": key '" + key + "' has the wrong type (" + j.at(key).dump() +
                    "): expected an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                    std::to_string(std::numeric_limits<T>::max()) + "]");
    }
  }
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw IoError(file.string() + ": key '" + key + "' has the wrong type (" + j.at(key).dump() + ")");
  }
}

void read_rope_scaling(const nlohmann::json& j, const fs::path& file, ModelConfig& m) {
  if (!j.contains("rope_scaling") || j.at("rope_scaling").is_null()) return;
  const auto& r = j.at("rope_scaling");
  if (!r.is_object()) throw IoError(file.string() + ": key 'rope_scaling' must be an object or null");
  const std::string type = r.contains("rope_type") ? field<std::string>(r, file, "rope_type")
                                                   : field<std::string>(r, file, "type", std::string("default"));
  if (type == "default") return;
  if (type != "llama3") {
    throw ConfigError(file.string() + ": rope_scaling.rope_type = '" + type +
                      "' is not supported (supported: llama3, or none)");
  }
  m.rope_scaling = RopeScaling::kLlama3;
  m.rope_scaling_factor = field<double>(r, file, "factor");
  m.rope_low_freq_factor = field<double>(r, file, "low_freq_factor");
  m.rope_high_freq_factor = field<double>(r, file, "high_freq_factor");
  m.rope_original_max_positions = field<int64_t>(r, file, "original_max_position_embeddings");
}

ModelConfig validated(const ModelConfig& m, const fs::path& file) {
  try {
    m.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(file.string() + " describes a model hwtrain cannot build: " + e.what());
  }
  return m;
}

// GPT-2 (GPT2LMHeadModel): biases everywhere, a tied head, learned positions (n_positions of them,
// of which the run uses its block_size), LayerNorm epsilon 1e-5, GELU exact or tanh ("gelu_new").
ModelConfig read_gpt2_config(const nlohmann::json& j, const fs::path& file, ModelConfig m) {
  m.architecture = Architecture::kGpt2;
  m.preset = "";
  m.n_embd = field<int64_t>(j, file, "n_embd");
  m.n_layer = field<int64_t>(j, file, "n_layer");
  m.n_head = field<int64_t>(j, file, "n_head");
  m.vocab_size = field<int64_t>(j, file, "vocab_size");
  m.n_kv_head = 0;
  m.bias = true;
  const int64_t positions = field<int64_t>(j, file, "n_positions");
  if (m.block_size > positions) {
    throw ConfigError(file.string() + ": n_positions = " + std::to_string(positions) + " is less than model.block_size = " +
                      std::to_string(m.block_size) + "; GPT-2's learned positions end there, so train with a block_size "
                      "up to it");
  }
  const std::string act = field<std::string>(j, file, "activation_function", std::string("gelu_new"));
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") {
    m.activation = Activation::kGeluTanh;
  } else if (act == "gelu") {
    m.activation = Activation::kGelu;
  } else {
    throw ConfigError(file.string() + ": activation_function = '" + act + "' is not supported (gelu, gelu_new)");
  }
  if (field<double>(j, file, "layer_norm_epsilon", 1e-5) != 1e-5) {
    throw ConfigError(file.string() + ": layer_norm_epsilon other than 1e-5 is not supported");
  }
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"}) {
    if (field<bool>(j, file, key, false)) throw ConfigError(file.string() + ": " + key + " = true is not supported");
  }
  if (!field<bool>(j, file, "scale_attn_weights", true)) {
    throw ConfigError(file.string() + ": scale_attn_weights = false is not supported");
  }
  if (!field<bool>(j, file, "tie_word_embeddings", true)) {  // hwtrain's GPT-2 ties its head to wte
    throw ConfigError(file.string() + ": tie_word_embeddings = false is not supported for GPT-2 (its lm_head would "
                      "be dropped and the head tied to wte)");
  }
  if (j.contains("n_inner") && !j.at("n_inner").is_null() && field<int64_t>(j, file, "n_inner") != 4 * m.n_embd) {
    throw ConfigError(file.string() + ": n_inner other than 4 n_embd is not supported");
  }
  return validated(m, file);
}

}  // namespace

const std::vector<std::string>& hf_config_model_keys() {
  static const std::vector<std::string> keys = {
      "model.architecture", "model.n_layer", "model.n_head", "model.n_kv_head", "model.n_embd",
      "model.intermediate_size", "model.vocab_size", "model.rms_norm_eps", "model.rope_theta", "model.rope_scaling",
      "model.tie_word_embeddings", "model.bias", "model.activation", "model.rope_scaling_factor",
      "model.rope_low_freq_factor", "model.rope_high_freq_factor", "model.rope_original_max_positions"};
  return keys;
}

namespace {
// What a directory given as a Hugging Face model is, when it is not one: said in one line, with the
// command that fits what it is (a hwtrain checkpoint or run directory is resumed or exported).
void check_is_hf_directory(const fs::path& dir) {
  std::error_code ec;
  const std::string want = ": expected a Hugging Face model directory (config.json, model.safetensors or its shards)";
  if (!fs::exists(dir, ec)) throw IoError(dir.string() + ": no such directory" + want);
  if (!fs::is_directory(dir, ec)) throw IoError(dir.string() + " is not a directory" + want);
  if (fs::exists(dir / "config.json", ec)) return;
  const bool checkpoint = fs::exists(dir / "COMPLETE", ec) && fs::exists(dir / "config.toml", ec);
  const bool run = fs::exists(dir / "checkpoints", ec) && fs::exists(dir / "config.toml", ec);
  if (checkpoint || run) {
    throw IoError(dir.string() + " is a hwtrain " + (checkpoint ? "checkpoint" : "run directory") +
                  ", not a Hugging Face model directory: `hwtrain train --resume " + dir.string() +
                  "` continues it, `hwtrain export " + dir.string() + " -o DIR` writes one to start from");
  }
  throw IoError(dir.string() + " has no config.json" + want);
}
}  // namespace

ModelConfig read_hf_model_config(const fs::path& dir, ModelConfig m) {
  check_is_hf_directory(dir);
  const fs::path file = dir / "config.json";
  const nlohmann::json j = read_json(file);
  if (!j.is_object()) throw IoError(file.string() + " must hold a JSON object");
  const std::string type = field<std::string>(j, file, "model_type");
  if (type == "gpt2") return read_gpt2_config(j, file, m);
  if (type != "llama" && type != "mistral" && type != "qwen2") {
    throw ConfigError(file.string() + ": model_type = '" + type +
                      "' is not supported for import (supported: gpt2, llama, mistral, qwen2)");
  }
  if (const auto act = field<std::string>(j, file, "hidden_act", std::string("silu")); act != "silu") {
    throw ConfigError(file.string() + ": hidden_act = '" + act + "' is not supported (the Llama family's is silu)");
  }
  m.architecture = Architecture::kLlama;
  m.activation = Activation::kGelu;
  m.preset = "";
  m.n_embd = field<int64_t>(j, file, "hidden_size");
  m.n_layer = field<int64_t>(j, file, "num_hidden_layers");
  m.n_head = field<int64_t>(j, file, "num_attention_heads");
  m.n_kv_head = field<int64_t>(j, file, "num_key_value_heads", m.n_head);
  m.intermediate_size = field<int64_t>(j, file, "intermediate_size");
  m.vocab_size = field<int64_t>(j, file, "vocab_size");
  m.rms_norm_eps = field<double>(j, file, "rms_norm_eps", 1e-6);
  m.rope_theta = field<double>(j, file, "rope_theta", 10000.0);
  m.tie_word_embeddings = field<bool>(j, file, "tie_word_embeddings", false);
  m.rope_scaling = RopeScaling::kNone;
  read_rope_scaling(j, file, m);
  m.bias = type == "qwen2";  // Qwen2's q/k/v biases
  if (field<bool>(j, file, "attention_bias", false) || field<bool>(j, file, "mlp_bias", false)) {
    throw ConfigError(file.string() + ": attention_bias / mlp_bias = true is not supported (only Qwen2's q/k/v biases)");
  }
  if (m.n_head > 0 && j.contains("head_dim") && !j.at("head_dim").is_null() &&
      field<int64_t>(j, file, "head_dim") != m.n_embd / m.n_head) {
    throw ConfigError(file.string() + ": head_dim other than hidden_size / num_attention_heads is not supported");
  }
  const bool windowed = type == "mistral" || field<bool>(j, file, "use_sliding_window", false);
  if (windowed && j.contains("sliding_window") && !j.at("sliding_window").is_null() &&
      field<int64_t>(j, file, "sliding_window") < m.block_size) {
    throw ConfigError(file.string() + ": sliding_window = " + j.at("sliding_window").dump() +
                      " is shorter than model.block_size = " + std::to_string(m.block_size) +
                      "; sliding-window attention is not supported, so train with block_size <= sliding_window");
  }
  return validated(m, file);
}

int64_t read_hf_context_length(const fs::path& dir) {
  const fs::path file = dir / "config.json";
  const nlohmann::json j = read_json(file);
  const bool gpt2 = field<std::string>(j, file, "model_type") == "gpt2";
  const int64_t n = field<int64_t>(j, file, gpt2 ? "n_positions" : "max_position_embeddings");
  if (n <= 0) throw IoError(file.string() + ": the context length must be positive");
  return n;
}

bool is_hf_model_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "config.json", ec) &&
         (fs::is_regular_file(dir / "model.safetensors", ec) || fs::is_regular_file(dir / "model.safetensors.index.json", ec));
}

namespace {

// The shard files of DIR and the tensors each must hold (from the index; one file: no list).
std::map<std::string, std::set<std::string>> hf_shards(const fs::path& dir) {
  const fs::path index_file = dir / "model.safetensors.index.json";
  if (!fs::exists(index_file)) {
    if (!fs::exists(dir / "model.safetensors")) {
      throw IoError(dir.string() + " has neither model.safetensors nor model.safetensors.index.json");
    }
    return {{"model.safetensors", {}}};
  }
  const nlohmann::json index = read_json(index_file);
  if (!index.contains("weight_map") || !index.at("weight_map").is_object()) {
    throw IoError(index_file.string() + ": key 'weight_map' is missing or not an object");
  }
  std::map<std::string, std::set<std::string>> by_shard;
  for (const auto& [name, shard] : index.at("weight_map").items()) {
    if (!shard.is_string() || !is_path_inside_dir(shard.get<std::string>()) ||
        shard.get<std::string>().find('/') != std::string::npos) {
      throw IoError(index_file.string() + ": weight_map['" + name + "'] must name a file in " + dir.string());
    }
    by_shard[shard.get<std::string>()].insert(name);
  }
  for (const auto& [shard, names] : by_shard) {
    if (!fs::exists(dir / shard)) throw IoError(index_file.string() + " lists shard " + shard + ", which is missing");
  }
  return by_shard;
}

// The names of the tensors to take from one mapped shard, in file order: all of them (a single
// file), or those the index puts there, each present.
std::vector<std::string> shard_tensor_names(const MappedSafetensors& shard, const std::set<std::string>& listed) {
  if (listed.empty()) return shard.names();
  for (const auto& name : listed) {
    if (!shard.contains(name)) {
      throw IoError(shard.path().string() + " lacks tensor '" + name + "' that the index puts there");
    }
  }
  std::vector<std::string> out;
  for (const auto& name : shard.names()) {
    if (listed.count(name)) out.push_back(name);
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> read_hf_weights(const fs::path& dir) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [shard, listed] : hf_shards(dir)) {
    const MappedSafetensors file(dir / shard);
    // Owned copies: the caller may keep or modify them; the mapping is read-only.
    for (const auto& name : shard_tensor_names(file, listed)) out.emplace_back(name, file.get(name).clone());
  }
  return out;
}

// Each shard is memory-mapped (its header checked first) and its tensors copied into the
// parameters one at a time, each tensor's pages dropped from the resident set once copied: the
// anonymous memory is the model (a dtype conversion or GPT-2's transpose happens inside copy_),
// and the resident file pages at most about one tensor, never a whole shard.
void load_hf_directory_weights(GPT& model, const fs::path& dir) {
  HfWeightLoader loader(model);
  for (const auto& [shard, listed] : hf_shards(dir)) {
    const MappedSafetensors file(dir / shard);
    const std::string what = file.path().string();
    for (const auto& name : shard_tensor_names(file, listed)) {
      loader.add({{name, file.get(name)}}, what);
      file.release_pages(name);
    }
  }
  loader.finish(dir.string());
}

}  // namespace hwt
