// The Llama-family decoder on its own (its equality with Hugging Face's is tests/interop): the
// parameter count from the shape alone matches the built model and the published sizes, names
// follow Hugging Face's, recomputation changes no gradient, and bad shapes are named.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "hwtrain/core/error.h"
#include "hwtrain/model/gpt.h"

namespace hwt {
namespace {

ModelConfig tiny_llama(int64_t kv_heads, bool tied, bool bias) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = kv_heads;
  c.n_embd = 32;
  c.block_size = 16;
  c.tie_word_embeddings = tied;
  c.bias = bias;
  return c;
}

TEST(Llama, CountFromTheShapeMatchesTheBuiltModel) {
  for (int64_t kv : {4, 2, 1}) {
    for (bool tied : {false, true}) {
      for (bool bias : {false, true}) {
        const ModelConfig cfg = tiny_llama(kv, tied, bias);
        GPT model(cfg, 64);
        EXPECT_EQ(model->num_parameters(), GPTImpl::count_parameters(cfg, 64)) << kv << tied << bias;
        EXPECT_EQ(model->named_parameters().contains("lm_head.weight"), !tied);
        EXPECT_EQ(model->named_parameters().contains("layers.0.self_attn.q_proj.bias"), bias);
      }
    }
  }
}

TEST(Llama, PresetsHaveThePublishedSizes) {
  // Hugging Face's own counts (model cards / num_parameters()).
  const std::pair<const char*, int64_t> published[] = {
      {"llama-3.2-1b", 1235814400}, {"llama-3.1-8b", 8030261248}, {"llama-2-7b", 6738415616},
      {"mistral-7b", 7248023552},   {"qwen2-0.5b", 494032768},    {"llama-3.1-70b", 70553706496}};
  for (const auto& [name, count] : published) {
    const ModelShape& s = model_presets().at(name);
    ModelConfig c;
    c.architecture = s.architecture;
    c.n_layer = s.n_layer;
    c.n_head = s.n_head;
    c.n_kv_head = s.n_kv_head;
    c.n_embd = s.n_embd;
    c.intermediate_size = s.intermediate_size;
    c.tie_word_embeddings = s.tie_word_embeddings;
    c.bias = s.bias;
    EXPECT_EQ(count_model_parameters(c, s.vocab_size), count) << name;
  }
}

TEST(Llama, NamesAreHuggingFacesWithoutTheModelPrefix) {
  GPT model(tiny_llama(2, false, false), 64);
  auto params = model->named_parameters();
  for (const char* name : {"embed_tokens.weight", "layers.1.self_attn.k_proj.weight", "layers.0.mlp.gate_proj.weight",
                           "layers.0.input_layernorm.weight", "layers.0.post_attention_layernorm.weight",
                           "norm.weight", "lm_head.weight"}) {
    EXPECT_TRUE(params.contains(name)) << name;
  }
  EXPECT_EQ(params["layers.1.self_attn.k_proj.weight"].sizes(), torch::IntArrayRef({16, 32}));  // 2 kv heads of 8
}

TEST(Llama, RecomputationGivesTheSameGradients) {
  torch::manual_seed(1);
  GPT model(tiny_llama(2, false, false), 64);
  const auto x = torch::randint(64, {2, 16}), y = torch::randint(64, {2, 16});
  auto grads = [&](int64_t every) {
    model->zero_grad();
    model->set_activation_checkpointing(every);
    model->forward_loss(x, y).backward();
    std::vector<torch::Tensor> g;
    for (const auto& p : model->parameters()) g.push_back(p.grad().clone());
    return g;
  };
  const auto plain = grads(0), recomputed = grads(1);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(torch::equal(plain[i], recomputed[i])) << i;
}

TEST(Llama, BadShapesAreNamed) {
  ModelConfig c = tiny_llama(3, false, false);  // 3 does not divide 4 heads
  EXPECT_THROW(GPT(c, 64), ConfigError);
  c = tiny_llama(2, false, false);
  c.n_embd = 36;  // head size 9: rotary needs pairs
  c.n_head = 4;
  EXPECT_THROW(GPT(c, 64), ConfigError);
  c = tiny_llama(2, false, false);
  c.architecture = Architecture::kGpt2;  // grouped-query attention is llama's
  EXPECT_THROW(GPT(c, 64), ConfigError);
}

}  // namespace
}  // namespace hwt
