// ModelConfig: the shape of the GPT model, and the named presets (tiny, char-small, gpt2, ...).
// Header-only plain struct so that config/ can bind it without linking the model.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"

namespace hwt {

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
  std::string attention = "auto";

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
    if (attention == "gemm" && dropout > 0) {
      throw ConfigError("config: model.attention = gemm has no attention dropout, but model.dropout = " +
                        option_text(dropout) + "; use model.attention = sdpa or math, or model.dropout = 0");
    }
  }

  template <class V>
  void visit(V& v) {
    v("preset", preset, "named model shape applied before any other model key; empty = custom",
      std::vector<std::string>{"", "tiny", "small", "char-small", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"});
    v("n_layer", n_layer, "number of transformer blocks");
    v("n_head", n_head, "attention heads (must divide n_embd)");
    v("n_embd", n_embd, "embedding (residual) width");
    v("block_size", block_size, "context length in tokens");
    v("vocab_size", vocab_size, "vocabulary size; 0 = the tokenizer's (257 for bytes + end-of-text) padded "
      "to a multiple of 64; a value set must cover the tokenizer's");
    v("dropout", dropout, "dropout probability in [0, 1)");
    v("bias", bias, "use biases in Linear and LayerNorm layers, as GPT-2");
    v("attention", attention, "attention kernel: auto (the planner), sdpa (LibTorch's fused "
      "flash/memory-efficient kernels), "
      "gemm (batched GEMMs with a hand-written backward; CPU, no dropout), math (reference, cached causal mask)",
      std::vector<std::string>{"auto", "sdpa", "gemm", "math"});
  }
};

// The presets: n_layer, n_head, n_embd, block_size.
struct ModelShape {
  int64_t n_layer, n_head, n_embd, block_size;
};
inline const std::map<std::string, ModelShape>& model_presets() {
  static const std::map<std::string, ModelShape> presets = {
      {"tiny", {2, 2, 64, 64}},           // unit tests and smoke runs
      {"small", {4, 4, 256, 256}},        // the default: learns English bytes in minutes on 2 cores
      {"char-small", {6, 6, 384, 256}},   // nanoGPT's shakespeare-char shape (workload W1)
      {"gpt2", {12, 12, 768, 1024}},      // GPT-2 124M
      {"gpt2-medium", {24, 16, 1024, 1024}},
      {"gpt2-large", {36, 20, 1280, 1024}},
      {"gpt2-xl", {48, 25, 1600, 1024}},
  };
  return presets;
}

}  // namespace hwt
