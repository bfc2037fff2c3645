#include "hwtrain/interop/hf_weights.h"

#include <set>

#include "hwtrain/core/error.h"

namespace hwt {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void require_llama(const ModelConfig& cfg) {
  if (!cfg.is_llama()) {
    throw ConfigError("Hugging Face weight names are mapped for model.architecture = llama only (gpt2: not yet)");
  }
}

}  // namespace

std::optional<std::string> hwtrain_name_from_hf(const ModelConfig& cfg, const std::string& hf_name) {
  require_llama(cfg);
  if (ends_with(hf_name, ".rotary_emb.inv_freq")) return std::nullopt;  // recomputed from rope_theta
  if (hf_name == "lm_head.weight") return cfg.tie_word_embeddings ? std::nullopt : std::optional<std::string>(hf_name);
  if (starts_with(hf_name, "model.")) return hf_name.substr(6);
  throw IoError("tensor '" + hf_name + "' is not a Llama-family weight (expected model.* or lm_head.weight)");
}

std::string hf_name_from_hwtrain(const ModelConfig& cfg, const std::string& name) {
  require_llama(cfg);
  return name == "lm_head.weight" ? name : "model." + name;
}

void load_hf_weights(GPT& model, const std::vector<std::pair<std::string, torch::Tensor>>& hf_tensors,
                     const std::string& what) {
  torch::NoGradGuard no_grad;
  auto params = model->named_parameters();
  std::set<std::string> loaded;
  for (const auto& [hf_name, value] : hf_tensors) {
    const std::optional<std::string> name = hwtrain_name_from_hf(model->config(), hf_name);
    if (!name) continue;
    torch::Tensor* p = params.find(*name);
    if (!p) throw IoError(what + ": tensor '" + hf_name + "' has no parameter '" + *name + "' in this model");
    if (value.sizes() != p->sizes()) {
      throw IoError(what + ": tensor '" + hf_name + "' has shape " + c10::str(value.sizes()) + ", the model's '" +
                    *name + "' is " + c10::str(p->sizes()) + " (does config.json match the weights?)");
    }
    if (!value.is_floating_point()) {
      throw IoError(what + ": tensor '" + hf_name + "' has dtype " + std::string(c10::toString(value.scalar_type())) +
                    "; weights must be floating point (F32, BF16, F16)");
    }
    if (!loaded.insert(*name).second) throw IoError(what + ": tensor '" + hf_name + "' is given twice");
    p->copy_(value);
  }
  for (const auto& item : params) {
    if (!loaded.count(item.key())) {
      throw IoError(what + ": no tensor '" + hf_name_from_hwtrain(model->config(), item.key()) + "' for parameter '" +
                    item.key() + "'");
    }
  }
}

}  // namespace hwt
