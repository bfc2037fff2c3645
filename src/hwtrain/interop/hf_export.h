// Writing a model as a Hugging Face model directory that transformers'
// AutoModelForCausalLM.from_pretrained loads unchanged: config.json (model_type gpt2; llama, or
// qwen2 for q/k/v biases), the weights under Hugging Face's names in model.safetensors, or above
// max_shard_bytes in shards model-0000i-of-0000n.safetensors with model.safetensors.index.json.
// The directory is made beside `out` and renamed into place, so a failed export leaves nothing.
// GPT-2's Conv1D weights are written transposed, as it stores them. Tokenizer files are written
// when the run trained with a Hugging Face tokenizer: its tokenizer.json, and for the Llama 2 /
// Mistral form its tokenizer.model too (hwtrain's byte tokenizer and plain SentencePiece models
// have no Hugging Face form here).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/model/model_config.h"

namespace hwt {

struct HfExportOptions {
  // A Hugging Face tokenizer.json to write beside the weights (the run's own, when it trained with
  // one), with a tokenizer_config.json naming PreTrainedTokenizerFast; empty: no tokenizer files.
  std::string tokenizer_json;
  // The SentencePiece model beside it (a Llama 2 / Mistral form), written as tokenizer.model; empty: none.
  std::string tokenizer_model;
  torch::ScalarType dtype = torch::kFloat32;  // of the written weights: F32, BF16 or F16
  int64_t max_shard_bytes = 5'000'000'000;    // transformers' default: shard above 5 GB
  // The run tokenizer's end-of-text id, written as config.json's eos_token_id (and GPT-2's
  // bos_token_id, as GPT-2's own config has both): without it, transformers' generate() falls back
  // to its defaults (GPT-2's 50256, Llama's 2), which may lie outside this vocabulary.
  std::optional<int64_t> eos_token_id;
};

// The config.json transformers reads for `m` (a Llama-family config with vocab_size resolved).
std::string hf_config_json(const ModelConfig& m, torch::ScalarType dtype);

// Writes `weights` (hwtrain's parameter names) of the model `m` to the directory `out`, which must
// not exist or be empty. ConfigError for an unsupported dtype (or gpt2 without biases), IoError if
// writing fails.
void export_hf(const ModelConfig& m, const std::vector<std::pair<std::string, torch::Tensor>>& weights,
               const std::filesystem::path& out, const HfExportOptions& options = {});

}  // namespace hwt
