// ModelConfig: the shape of the GPT model, and the named presets (tiny, char-small, gpt2, ...).
// Header-only plain struct so that config/ can bind it without linking the model.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/model/attention_kernel.h"

namespace hwt {

// The model family: gpt2 (LayerNorm, learned positions, GELU MLP, tied head) or llama (RMSNorm,
// rotary positions, SwiGLU MLP, grouped-query attention).
enum class Architecture { kGpt2, kLlama };
template <>
struct EnumNames<Architecture> {
  static constexpr std::array<std::pair<Architecture, const char*>, 2> table{{
      {Architecture::kGpt2, "gpt2"},
      {Architecture::kLlama, "llama"}}};
};

// gpt2's MLP activation: exact GELU (erf) or its tanh approximation (GPT-2's released checkpoints).
enum class Activation { kGelu, kGeluTanh };
template <>
struct EnumNames<Activation> {
  static constexpr std::array<std::pair<Activation, const char*>, 2> table{{
      {Activation::kGelu, "gelu"},
      {Activation::kGeluTanh, "gelu_tanh"}}};
};

// llama's rotary frequencies: unscaled, or Llama 3.1's long-context scaling.
enum class RopeScaling { kNone, kLlama3 };
template <>
struct EnumNames<RopeScaling> {
  static constexpr std::array<std::pair<RopeScaling, const char*>, 2> table{{
      {RopeScaling::kNone, "none"},
      {RopeScaling::kLlama3, "llama3"}}};
};

struct ModelConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  std::string preset = "small";
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 256;
  int64_t block_size = 256;
  // Rounded up to a multiple of 64 because matmuls with such widths run faster.
  int64_t vocab_size = 0;
  // Off by default: small runs on small corpora overfit little in 5 minutes.
  double dropout = 0.0;
  bool bias = true;
  std::optional<AttentionKernel> attention;  // empty = auto: the planner chooses
  // The Llama family (Llama 2/3, Mistral, Qwen2): RMSNorm, rotary positions, SwiGLU MLP, grouped-query
  // attention, untied head by default. These keys apply to architecture = "llama" only.
  Architecture architecture = Architecture::kGpt2;
  Activation activation = Activation::kGelu;
  int64_t n_kv_head = 0;          // 0 = n_head (multi-head attention)
  int64_t intermediate_size = 0;  // 0 = Llama's rule: 8/3 n_embd rounded up to a multiple of multiple_of
  int64_t multiple_of = 256;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_scaling_factor = 8.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_max_positions = 8192;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;

  bool is_llama() const { return architecture == Architecture::kLlama; }
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int64_t head_dim() const { return n_embd / n_head; }
  // The MLP width: 4 n_embd for GPT-2; for Llama the configured one or its rounding rule.
  int64_t mlp_width() const {
    if (!is_llama()) return 4 * n_embd;
    if (intermediate_size > 0) return intermediate_size;
    const int64_t hidden = 2 * (4 * n_embd) / 3;
    return (hidden + multiple_of - 1) / multiple_of * multiple_of;
  }
  bool tied_head() const { return !is_llama() || tie_word_embeddings; }

  // Range and cross-field checks of this table; ConfigError naming the key and what is valid.
  void validate() const {
    check_at_least("model.n_layer", n_layer, 1);
    check_at_least("model.n_head", n_head, 1);
    check_at_least("model.n_embd", n_embd, 1);
    check_at_least("model.block_size", block_size, 1);
    check_at_least("model.vocab_size", vocab_size, 0);
    if (n_embd % n_head != 0) {
      throw ConfigError("config: model.n_embd = " + std::to_string(n_embd) + " is not divisible by model.n_head = " +
                        std::to_string(n_head) + "; choose n_embd a multiple of n_head (e.g. " +
                        std::to_string((n_embd / n_head + 1) * n_head) + ")");
    }
    check_in_range("model.dropout", dropout, 0.0, 1.0, false);
    if (is_llama() && activation != Activation::kGelu) {
      throw ConfigError(std::string("config: model.activation = ") + enum_name(activation) +
                        " applies to gpt2; llama's MLP is SwiGLU (silu)");
    }
    check_at_least("model.n_kv_head", n_kv_head, 0);
    if (n_kv_head > 0 && n_head % n_kv_head != 0) {
      throw ConfigError("config: model.n_kv_head = " + std::to_string(n_kv_head) + " does not divide model.n_head = " +
                        std::to_string(n_head) + "; each key/value head serves n_head / n_kv_head query heads");
    }
    if (!is_llama() && n_kv_head > 0 && n_kv_head != n_head) {
      throw ConfigError("config: model.n_kv_head = " + std::to_string(n_kv_head) +
                        " needs model.architecture = llama; gpt2 has one key/value head per query head");
    }
    check_at_least("model.intermediate_size", intermediate_size, 0);
    check_at_least("model.multiple_of", multiple_of, 1);
    if (is_llama() && head_dim() % 2 != 0) {
      throw ConfigError("config: model.n_embd / model.n_head = " + std::to_string(head_dim()) +
                        " is odd; rotary position embeddings rotate pairs of channels, so it must be even");
    }
    if (!(rope_theta > 0)) option_range_error("model.rope_theta", option_text(rope_theta), "must be positive");
    if (!(rms_norm_eps > 0)) option_range_error("model.rms_norm_eps", option_text(rms_norm_eps), "must be positive");
    if (rope_scaling == RopeScaling::kLlama3 &&
        !(rope_scaling_factor >= 1 && rope_high_freq_factor > rope_low_freq_factor && rope_low_freq_factor > 0)) {
      throw ConfigError("config: model.rope_scaling = llama3 needs rope_scaling_factor >= 1 and "
                        "rope_high_freq_factor > rope_low_freq_factor > 0");
    }
    check_at_least("model.rope_original_max_positions", rope_original_max_positions, 1);
    if (attention == AttentionKernel::Gemm && dropout > 0) {
      throw ConfigError("config: model.attention = gemm has no attention dropout, but model.dropout = " +
                        option_text(dropout) + "; use model.attention = sdpa or math, or model.dropout = 0");
    }
  }

  template <class V>
  void visit(V& v) {
    v("preset", preset, "named model shape applied before any other model key; empty = custom",
      std::vector<std::string>{"", "tiny", "small", "char-small", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl",
                               "llama-tiny", "llama-3.2-1b", "llama-3.1-8b", "llama-2-7b", "llama-3.1-70b",
                               "mistral-7b", "qwen2-0.5b"});
    v("n_layer", n_layer, "number of transformer blocks");
    v("n_head", n_head, "attention heads (must divide n_embd)");
    v("n_embd", n_embd, "embedding (residual) width");
    v("block_size", block_size, "context length in tokens");
    v("vocab_size", vocab_size, "vocabulary size; 0 = the tokenizer's (257 for bytes + end-of-text) padded "
      "to a multiple of 64; a value set must cover the tokenizer's");
    v("dropout", dropout, "dropout probability in [0, 1)");
    v("bias", bias, "gpt2: biases in Linear and LayerNorm layers; llama: biases on the q/k/v projections "
      "(Qwen2), none elsewhere");
    v("attention", attention, "attention kernel: auto (the planner), sdpa (LibTorch's fused "
      "flash/memory-efficient kernels), "
      "gemm (batched GEMMs with a hand-written backward; CPU, no dropout), math (reference, cached causal mask)");
    v("architecture", architecture, "gpt2 (LayerNorm, learned positions, GELU MLP, tied head) or llama "
      "(RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention; Llama 2/3, Mistral, Qwen2)");
    v("activation", activation, "gpt2's MLP activation: gelu (exact, erf) or gelu_tanh (the tanh approximation "
      "GPT-2's released checkpoints use)");
    v("n_kv_head", n_kv_head, "llama: key/value heads (grouped-query attention); 0 = n_head");
    v("intermediate_size", intermediate_size, "llama: SwiGLU width; 0 = 8/3 n_embd rounded up to multiple_of");
    v("multiple_of", multiple_of, "llama: rounding of the derived intermediate_size");
    v("rope_theta", rope_theta, "llama: rotary base (10000 Llama 2, 500000 Llama 3, 1e6 Qwen2/Mistral)");
    v("rope_scaling", rope_scaling, "llama: none, or llama3 (Llama 3.1's long-context frequency scaling)");
    v("rope_scaling_factor", rope_scaling_factor, "llama3 rope scaling: factor");
    v("rope_low_freq_factor", rope_low_freq_factor, "llama3 rope scaling: low_freq_factor");
    v("rope_high_freq_factor", rope_high_freq_factor, "llama3 rope scaling: high_freq_factor");
    v("rope_original_max_positions", rope_original_max_positions,
      "llama3 rope scaling: original_max_position_embeddings");
    v("rms_norm_eps", rms_norm_eps, "llama: RMSNorm epsilon");
    v("tie_word_embeddings", tie_word_embeddings, "llama: share the token embedding with the LM head "
      "(gpt2 always does)");
  }
};

// The presets: a named shape (and for the Llama family the rest of the architecture). Keys a user
// sets explicitly win over the preset's (RunConfig::apply_model_preset).
struct ModelShape {
  int64_t n_layer, n_head, n_embd, block_size;
  Architecture architecture = Architecture::kGpt2;
  int64_t n_kv_head = 0, intermediate_size = 0, vocab_size = 0;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_scaling_factor = 8.0;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  bool bias = true;
};

inline ModelShape llama_shape(int64_t layers, int64_t heads, int64_t kv, int64_t width, int64_t mlp, int64_t block,
                              int64_t vocab, double theta, RopeScaling scaling, double factor, double eps,
                              bool tied, bool qkv_bias = false) {
  ModelShape s{layers, heads, width, block};
  s.architecture = Architecture::kLlama;
  s.n_kv_head = kv;
  s.intermediate_size = mlp;
  s.vocab_size = vocab;
  s.rope_theta = theta;
  s.rope_scaling = scaling;
  s.rope_scaling_factor = factor;
  s.rms_norm_eps = eps;
  s.tie_word_embeddings = tied;
  s.bias = qkv_bias;
  return s;
}

inline const std::map<std::string, ModelShape>& model_presets() {
  // The published configs (config.json on the Hugging Face hub); block_size is a training context,
  // not the model's maximum (rope scaling covers the long ones).
  static const std::map<std::string, ModelShape> presets = {
      {"tiny", {2, 2, 64, 64}},           // unit tests and smoke runs
      {"small", {4, 4, 256, 256}},        // the default: learns English bytes in minutes on 2 cores
      {"char-small", {6, 6, 384, 256}},   // nanoGPT's shakespeare-char shape (workload W1)
      {"gpt2", {12, 12, 768, 1024}},      // GPT-2 124M
      {"gpt2-medium", {24, 16, 1024, 1024}},
      {"gpt2-large", {36, 20, 1280, 1024}},
      {"gpt2-xl", {48, 25, 1600, 1024}},
      // A Llama-family model for tests and smoke runs (GQA 4:2, the tokenizer's vocabulary).
      {"llama-tiny", llama_shape(2, 4, 2, 64, 0, 64, 0, 10000.0, RopeScaling::kNone, 8.0, 1e-5, false)},
      {"llama-3.2-1b", llama_shape(16, 32, 8, 2048, 8192, 2048, 128256, 500000.0, RopeScaling::kLlama3, 32.0, 1e-5, true)},
      {"llama-3.1-8b", llama_shape(32, 32, 8, 4096, 14336, 2048, 128256, 500000.0, RopeScaling::kLlama3, 8.0, 1e-5, false)},
      {"llama-2-7b", llama_shape(32, 32, 32, 4096, 11008, 2048, 32000, 10000.0, RopeScaling::kNone, 8.0, 1e-5, false)},
      {"llama-3.1-70b", llama_shape(80, 64, 8, 8192, 28672, 2048, 128256, 500000.0, RopeScaling::kLlama3, 8.0, 1e-5, false)},
      // Mistral 7B v0.3 (vocabulary 32768, theta 1e6; v0.1 had 32000 and a 4096-token sliding window).
      {"mistral-7b", llama_shape(32, 32, 8, 4096, 14336, 2048, 32768, 1000000.0, RopeScaling::kNone, 8.0, 1e-5, false)},
      {"qwen2-0.5b", llama_shape(24, 14, 2, 896, 4864, 2048, 151936, 1000000.0, RopeScaling::kNone, 8.0, 1e-6, true, true)},
  };
  return presets;
}

// Parameters of the decoder `m` describes with `vocab_size` tokens (each tied tensor once),
// position embeddings (gpt2's learned ones) included or not.
inline int64_t count_model_parameters(const ModelConfig& m, int64_t vocab_size, bool with_position_embedding = true) {
  const int64_t c = m.n_embd, l = m.n_layer, b = m.bias ? 1 : 0;
  if (!m.is_llama()) {
    // Per block: 2 LayerNorms, qkv (3C^2 + 3C), proj (C^2 + C), fc (4C^2 + 4C), mlp proj (4C^2 + C).
    const int64_t per_block = 12 * c * c + 2 * c + b * (2 * c + 3 * c + c + 4 * c + c);
    return vocab_size * c + (with_position_embedding ? m.block_size * c : 0) + l * per_block + c + b * c;
  }
  const int64_t kv = m.kv_heads() * m.head_dim(), i = m.mlp_width();
  const int64_t attention = c * c + 2 * c * kv + c * c + b * (c + 2 * kv);  // q, k, v, o (+ q/k/v biases)
  const int64_t per_block = 2 * c + attention + 3 * c * i;                   // 2 RMSNorms, SwiGLU
  return vocab_size * c * (m.tied_head() ? 1 : 2) + l * per_block + c;
}

}  // namespace hwt
