// A Hugging Face model directory, read: config.json mapped onto hwtrain's ModelConfig and the
// weights from model.safetensors or its shards (model-0000x-of-0000y.safetensors listed by
// model.safetensors.index.json). Supported model_type: gpt2, llama, mistral, qwen2. Everything
// read is untrusted: sizes are bounded, shard names must stay inside the directory, every tensor
// the index lists must be in its shard; errors are IoError or ConfigError naming the file and key.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/model/gpt.h"
#include "hwtrain/model/model_config.h"

namespace hwt {

// `base` with the architecture and shape of DIR/config.json (block_size and dropout stay base's).
ModelConfig read_hf_model_config(const std::filesystem::path& dir, ModelConfig base);

// The longest context the model was made for: n_positions (gpt2) or max_position_embeddings.
int64_t read_hf_context_length(const std::filesystem::path& dir);

// True when `dir` looks like a Hugging Face model directory (config.json and weights).
bool is_hf_model_dir(const std::filesystem::path& dir);

// The weights under Hugging Face's names, on the CPU in the file's dtype.
std::vector<std::pair<std::string, torch::Tensor>> read_hf_weights(const std::filesystem::path& dir);

// Loads DIR's weights into `model` from its memory-mapped shards, a tensor at a time (no shard is
// read into memory; each tensor's pages are released once copied), every name,
// shape and dtype checked and every parameter required (interop/hf_weights.h).
void load_hf_directory_weights(GPT& model, const std::filesystem::path& dir);

// The ModelConfig keys read_hf_model_config sets (for "explicit key conflicts with config.json").
const std::vector<std::string>& hf_config_model_keys();

}  // namespace hwt
