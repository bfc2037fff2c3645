#include "hwtrain/interop/hf_weights.h"

#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/model/deferred_init.h"

namespace hwt {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::optional<std::string> hwtrain_name_from_hf(const ModelConfig& cfg, const std::string& hf_name) {
  if (!cfg.is_llama()) {
    if (hf_name == "lm_head.weight") return std::nullopt;  // tied to wte
    // GPT2LMHeadModel's names, or GPT2Model's without the prefix (the Hub's own gpt2 files).
    const bool bare = starts_with(hf_name, "h.") || starts_with(hf_name, "wte.") || starts_with(hf_name, "wpe.") ||
                      starts_with(hf_name, "ln_f.");
    if (!bare && !starts_with(hf_name, "transformer.")) {
      throw IoError("tensor '" + hf_name + "' is not a GPT-2 weight (expected transformer.*, h.*, wte.*, wpe.*, "
                    "ln_f.* or lm_head.weight)");
    }
    const std::string name = bare ? hf_name : hf_name.substr(12);
    if (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias")) return std::nullopt;  // masks
    return name;
  }
  if (ends_with(hf_name, ".rotary_emb.inv_freq")) return std::nullopt;  // recomputed from rope_theta
  if (hf_name == "lm_head.weight") return cfg.tie_word_embeddings ? std::nullopt : std::optional<std::string>(hf_name);
  if (starts_with(hf_name, "model.")) return hf_name.substr(6);
  throw IoError("tensor '" + hf_name + "' is not a Llama-family weight (expected model.* or lm_head.weight)");
}

std::string hf_name_from_hwtrain(const ModelConfig& cfg, const std::string& name) {
  if (!cfg.is_llama()) return "transformer." + name;
  return name == "lm_head.weight" ? name : "model." + name;
}

bool hf_stores_transposed(const ModelConfig& cfg, const std::string& name) {
  if (cfg.is_llama() || !ends_with(name, ".weight")) return false;
  for (const char* conv1d : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    if (ends_with(name, conv1d)) return true;
  }
  return false;
}

void HfWeightLoader::add(const std::vector<std::pair<std::string, torch::Tensor>>& hf_tensors, const std::string& what) {
  torch::NoGradGuard no_grad;
  auto params = model_->named_parameters();
  for (const auto& [hf_name, value] : hf_tensors) {
    std::optional<std::string> name;
    try {
      name = hwtrain_name_from_hf(model_->config(), hf_name);
    } catch (const IoError& e) {
      throw IoError(what + ": " + e.what());  // which shard holds it
    }
    if (!name) continue;
    torch::Tensor* p = params.find(*name);
    if (!p) throw IoError(what + ": tensor '" + hf_name + "' has no parameter '" + *name + "' in this model");
    torch::Tensor t = hf_stores_transposed(model_->config(), *name) ? value.t() : value;
    if (*name == "wpe.weight" && t.dim() == 2 && t.size(0) > p->size(0)) t = t.narrow(0, 0, p->size(0));
    if (t.sizes() != p->sizes()) {
      throw IoError(what + ": tensor '" + hf_name + "' has shape " + c10::str(t.sizes()) + ", the model's '" +
                    *name + "' is " + c10::str(p->sizes()) + " (does config.json match the weights?)");
    }
    if (!value.is_floating_point()) {
      throw IoError(what + ": tensor '" + hf_name + "' has dtype " + std::string(c10::toString(value.scalar_type())) +
                    "; weights must be floating point (F32, BF16, F16)");
    }
    if (!loaded_.insert(*name).second) throw IoError(what + ": tensor '" + hf_name + "' is given twice");
    assign_parameter(*p, t);  // a deferred model's placeholder takes the value
  }
}

void HfWeightLoader::finish(const std::string& what) const {
  for (const auto& item : model_->named_parameters()) {
    if (!loaded_.count(item.key())) {
      throw IoError(what + ": no tensor '" + hf_name_from_hwtrain(model_->config(), item.key()) + "' for parameter '" +
                    item.key() + "'");
    }
  }
}

void load_hf_weights(GPT& model, const std::vector<std::pair<std::string, torch::Tensor>>& hf_tensors,
                     const std::string& what) {
  HfWeightLoader loader(model);
  loader.add(hf_tensors, what);
  loader.finish(what);
}

}  // namespace hwt
