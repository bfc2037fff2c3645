// Hugging Face weight names and hwtrain's. The Llama family (Llama, Mistral, Qwen2): hwtrain names
// its modules as Hugging Face does without the "model." prefix (model/llama_block.h). GPT-2:
// without "transformer.", and its Conv1D weights (c_attn, c_proj, c_fc) are stored (in, out), so
// they are transposed both ways; a longer position table than block_size is cut to block_size;
// the attention-mask buffers of old checkpoints are skipped. A tied head has no lm_head.weight of
// its own. Loading checks every name, shape and dtype (IoError naming the tensor and where it came
// from) and converts bf16/fp16 to the parameter's dtype.
#pragma once
#include <torch/torch.h>

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/model/gpt.h"

namespace hwt {

// hwtrain's parameter name for Hugging Face's `hf_name`, or nullopt for tensors hwtrain has no
// parameter for and may skip (rotary inv_freq, GPT-2's mask buffers, a tied lm_head). Throws
// IoError for a name of neither kind.
std::optional<std::string> hwtrain_name_from_hf(const ModelConfig& cfg, const std::string& hf_name);
// Whether Hugging Face stores hwtrain's parameter `name` transposed (GPT-2's Conv1D weights).
bool hf_stores_transposed(const ModelConfig& cfg, const std::string& name);
// Hugging Face's name for hwtrain's parameter `name` (the inverse, for export).
std::string hf_name_from_hwtrain(const ModelConfig& cfg, const std::string& name);

// Loads a model's weights from any number of groups of tensors (a directory's shards, memory-mapped
// and given a tensor at a time: io/mapped_safetensors.h): add() checks and copies each group,
// finish() checks that every parameter was given.
class HfWeightLoader {
 public:
  explicit HfWeightLoader(GPT& model) : model_(model) {}
  void add(const std::vector<std::pair<std::string, torch::Tensor>>& hf_tensors, const std::string& what);
  void finish(const std::string& what) const;

 private:
  GPT& model_;
  std::set<std::string> loaded_;
};

// Copies `hf_tensors` into `model`'s parameters (no autograd). Every parameter must be given
// exactly once with its shape; `what` names the source in errors ("model.safetensors in DIR").
void load_hf_weights(GPT& model, const std::vector<std::pair<std::string, torch::Tensor>>& hf_tensors,
                     const std::string& what);

}  // namespace hwt
