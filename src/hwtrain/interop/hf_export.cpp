#include "hwtrain/interop/hf_export.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/interop/hf_weights.h"
#include "hwtrain/io/safetensors.h"

namespace hwt {
namespace fs = std::filesystem;
namespace {

const char* dtype_json_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32: return "float32";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat16: return "float16";
    default: throw ConfigError("export: weights can be written as float32, bfloat16 or float16");
  }
}

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

// Consecutive groups of tensors of at most max_bytes each (a larger tensor gets a shard alone).
std::vector<std::vector<std::pair<std::string, torch::Tensor>>> split_shards(
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors, int64_t max_bytes) {
  std::vector<std::vector<std::pair<std::string, torch::Tensor>>> shards(1);
  int64_t bytes = 0;
  for (const auto& t : tensors) {
    const int64_t size = t.second.numel() * t.second.element_size();
    if (!shards.back().empty() && bytes + size > max_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(t);
    bytes += size;
  }
  return shards;
}

void write_weights(const fs::path& dir, const std::vector<std::pair<std::string, torch::Tensor>>& hf,
                   int64_t max_shard_bytes) {
  const std::map<std::string, std::string> metadata{{"format", "pt"}};  // what transformers writes
  const auto shards = split_shards(hf, max_shard_bytes);
  if (shards.size() == 1) {
    save_safetensors(dir / "model.safetensors", shards[0], metadata);
    return;
  }
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  int64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shard_name(i, shards.size());
    save_safetensors(dir / name, shards[i], metadata);
    for (const auto& [tensor, value] : shards[i]) {
      index["weight_map"][tensor] = name;
      total += value.numel() * value.element_size();
    }
  }
  index["metadata"]["total_size"] = total;
  write_file_atomic(dir / "model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace

std::string gpt2_config_json(const ModelConfig& m, torch::ScalarType dtype) {
  if (!m.bias) throw ConfigError("export --format hf: Hugging Face's GPT-2 has biases; model.bias = false has no form there");
  const nlohmann::json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"n_embd", m.n_embd},
      {"n_layer", m.n_layer},
      {"n_head", m.n_head},
      {"n_positions", m.block_size},
      {"n_ctx", m.block_size},
      {"n_inner", nullptr},
      {"vocab_size", m.vocab_size},
      {"activation_function", m.activation == Activation::kGeluTanh ? "gelu_new" : "gelu"},
      {"layer_norm_epsilon", 1e-5},
      {"initializer_range", 0.02},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"scale_attn_weights", true},
      {"tie_word_embeddings", true},
      {"torch_dtype", dtype_json_name(dtype)},
  };
  return j.dump(2) + "\n";
}

std::string hf_config_json(const ModelConfig& m, torch::ScalarType dtype) {
  if (!m.is_llama()) return gpt2_config_json(m, dtype);
  const bool qwen2 = m.bias;
  nlohmann::json j = {
      {"architectures", {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
      {"model_type", qwen2 ? "qwen2" : "llama"},
      {"hidden_size", m.n_embd},
      {"intermediate_size", m.mlp_width()},
      {"num_hidden_layers", m.n_layer},
      {"num_attention_heads", m.n_head},
      {"num_key_value_heads", m.kv_heads()},
      {"vocab_size", m.vocab_size},
      {"max_position_embeddings", m.block_size},
      {"rms_norm_eps", m.rms_norm_eps},
      {"rope_theta", m.rope_theta},
      {"tie_word_embeddings", m.tie_word_embeddings},
      {"hidden_act", "silu"},
      {"initializer_range", 0.02},
      {"attention_dropout", 0.0},
      {"torch_dtype", dtype_json_name(dtype)},
  };
  if (qwen2) {
    j["use_sliding_window"] = false;
  } else {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  }
  j["rope_scaling"] = nullptr;
  if (m.rope_scaling == RopeScaling::kLlama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", m.rope_scaling_factor},
                         {"low_freq_factor", m.rope_low_freq_factor},
                         {"high_freq_factor", m.rope_high_freq_factor},
                         {"original_max_position_embeddings", m.rope_original_max_positions}};
  }
  return j.dump(2) + "\n";
}

namespace {

// Removes the staging directories of exports to `out` that were killed (their process is gone) an
// hour or more ago; a live export's, or one of another host sharing the file system within the
// hour, is left alone.
void remove_stale_staging(const fs::path& parent, const std::string& name) {
  const std::string prefix = "." + name + ".partial-";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(prefix, 0) != 0 || file.size() == prefix.size() || file.size() > prefix.size() + 9) continue;
    if (file.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(file.substr(prefix.size())));
    const auto age = fs::file_time_type::clock::now() - fs::last_write_time(entry.path(), ec);
    if (ec || age < std::chrono::hours(1) || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

void export_hf(const ModelConfig& m, const std::vector<std::pair<std::string, torch::Tensor>>& weights,
               const fs::path& out_arg, const HfExportOptions& options) {
  // "exp/" names the directory exp: its staging sibling must not land inside it.
  fs::path out = out_arg.lexically_normal();
  if (!out.has_filename()) out = out.parent_path();
  std::string config = hf_config_json(m, options.dtype);
  if (options.eos_token_id) {
    nlohmann::json j = nlohmann::json::parse(config);
    j["eos_token_id"] = *options.eos_token_id;
    if (!m.is_llama()) j["bos_token_id"] = *options.eos_token_id;
    config = j.dump(2) + "\n";
  }
  if (options.max_shard_bytes <= 0) throw ConfigError("export: the maximum shard size must be positive");
  if (fs::exists(out) && !(fs::is_directory(out) && fs::is_empty(out))) {
    throw IoError("export: " + out.string() + " exists and is not an empty directory; choose a new one");
  }
  std::vector<std::pair<std::string, torch::Tensor>> hf;
  for (const auto& [name, value] : weights) {
    const torch::Tensor t = hf_stores_transposed(m, name) ? value.detach().t() : value.detach();
    hf.emplace_back(hf_name_from_hwtrain(m, name), t.to(torch::kCPU, options.dtype).contiguous());
    if (!torch::isfinite(hf.back().second).all().item<bool>()) {  // fp16 tops out at 65504
      throw ConfigError("export: tensor '" + name + "' (largest magnitude " +
                        std::to_string(value.detach().abs().max().item<double>()) + ") does not fit " +
                        dtype_json_name(options.dtype) + "; export with --dtype bf16 or fp32");
    }
  }
  // Hidden, and this process's own: never a directory of the user's.
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  remove_stale_staging(parent, out.filename().string());
  const fs::path staging = parent / ("." + out.filename().string() + ".partial-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) throw IoError("export: cannot create " + staging.string() + ": " + ec.message());
  try {
    write_file_atomic(staging / "config.json", config);
    write_weights(staging, hf, options.max_shard_bytes);
    if (!options.tokenizer_json.empty()) {
      write_file_atomic(staging / "tokenizer.json", options.tokenizer_json);
      if (!options.tokenizer_model.empty()) write_file_atomic(staging / "tokenizer.model", options.tokenizer_model);
      write_file_atomic(staging / "tokenizer_config.json",
                        nlohmann::json({{"tokenizer_class", "PreTrainedTokenizerFast"}}).dump(2) + "\n");
    }
    fsync_path(staging);
    if (fs::exists(out)) fs::remove(out);  // the empty directory it replaces
    rename_durable(staging, out);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(staging, ec);
    throw IoError("export: cannot write " + out.string() + ": " + e.code().message());
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
}

}  // namespace hwt
