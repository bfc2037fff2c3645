// Both families against the reference implementation: tiny random-weight Llama (multi-head;
// grouped-query with Llama 3.1 rope scaling), Qwen2 (q/k/v biases, tied head) and GPT-2 (Conv1D
// layout, gelu_new) models built by
// Hugging Face transformers (tests/interop/reference/hf_reference.py), loaded into hwtrain
// by name; fp32 logits, the loss and every gradient must match within 1e-4. Skips, saying why,
// where the test python has no transformers (scripts/install-deps.sh installs it into hwtrain's venv).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "hwtrain/core/error.h"
#include "hwtrain/interop/hf_weights.h"
#include "hwtrain/io/safetensors.h"
#include "interop/reference_dir.h"

namespace hwt {
namespace {

struct Case {
  const char* name;
  ModelConfig cfg;
};

ModelConfig llama(int64_t kv_heads, int64_t intermediate, double theta, bool llama3, bool tied, bool bias, double eps) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = kv_heads;
  c.n_embd = 64;
  c.block_size = 64;
  c.vocab_size = 320;
  c.intermediate_size = intermediate;
  c.rope_theta = theta;
  if (llama3) {
    c.rope_scaling = RopeScaling::kLlama3;
    c.rope_scaling_factor = 8.0;
    c.rope_low_freq_factor = 1.0;
    c.rope_high_freq_factor = 4.0;
    c.rope_original_max_positions = 16;
  }
  c.tie_word_embeddings = tied;
  c.bias = bias;
  c.rms_norm_eps = eps;
  return c;
}

ModelConfig gpt2() {
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 64;
  c.block_size = 32;
  c.vocab_size = 320;
  c.activation = Activation::kGeluTanh;
  return c;
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

class HfReference : public ::testing::TestWithParam<Case> {};

TEST_P(HfReference, LogitsLossAndGradientsMatchTransformers) {
  if (testing::hf_reference_dir().empty()) GTEST_SKIP() << HWTRAIN_PYTHON << " has no transformers (scripts/install-deps.sh)";
  const Case& c = GetParam();
  const SafetensorsFile ref = load_safetensors(fs::path(testing::hf_reference_dir()) / (std::string(c.name) + ".safetensors"));
  std::vector<std::pair<std::string, torch::Tensor>> weights, grads;
  for (const auto& [name, t] : ref.tensors) {
    if (name.rfind("weight.", 0) == 0) weights.emplace_back(name.substr(7), t);
    if (name.rfind("grad.", 0) == 0) grads.emplace_back(name.substr(5), t);
  }
  GPT model(c.cfg, c.cfg.vocab_size, AttentionKernel::Math);
  load_hf_weights(model, weights, c.name);
  const auto ids = ref.get("ref.ids"), targets = ref.get("ref.targets");

  for (auto kernel : {AttentionKernel::Math, AttentionKernel::Sdpa, AttentionKernel::Gemm}) {
    model->set_attention_kernel(kernel);
    model->eval();
    torch::NoGradGuard no_grad;
    EXPECT_LT(max_abs_diff(model->forward(ids), ref.get("ref.logits")), 1e-4)
        << c.name << ", kernel " << to_string(kernel);
  }
  model->set_attention_kernel(AttentionKernel::Sdpa);
  model->train();
  auto loss = model->forward_loss(ids, targets);
  EXPECT_NEAR(loss.item<double>(), ref.get("ref.loss").item<double>(), 1e-5) << c.name;
  loss.backward();
  auto params = model->named_parameters();
  for (const auto& [hf_name, g] : grads) {
    const auto name = hwtrain_name_from_hf(c.cfg, hf_name);
    ASSERT_TRUE(name.has_value()) << hf_name;
    const torch::Tensor* p = params.find(*name);
    ASSERT_NE(p, nullptr) << *name;
    ASSERT_TRUE(p->grad().defined()) << *name;
    const torch::Tensor theirs = hf_stores_transposed(c.cfg, *name) ? g.t() : g;
    EXPECT_LT(max_abs_diff(p->grad(), theirs), 1e-4) << c.name << " gradient of " << *name;
  }
  EXPECT_EQ(grads.size(), params.size()) << "every parameter's gradient compared";
}

INSTANTIATE_TEST_SUITE_P(
    Families, HfReference,
    ::testing::Values(Case{"llama_mha", llama(4, 172, 10000.0, false, false, false, 1e-5)},
                      Case{"llama_gqa_rope3", llama(2, 160, 500000.0, true, false, false, 1e-5)},
                      Case{"qwen2", llama(1, 128, 1000000.0, false, true, true, 1e-6)}, Case{"gpt2", gpt2()}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(HfWeights, MissingWrongShapeAndUnknownTensorsAreNamed) {
  ModelConfig cfg = llama(2, 160, 10000.0, false, false, false, 1e-5);
  GPT model(cfg, cfg.vocab_size);
  std::vector<std::pair<std::string, torch::Tensor>> all;
  for (const auto& item : model->named_parameters()) all.emplace_back(hf_name_from_hwtrain(cfg, item.key()), item.value().clone());
  EXPECT_NO_THROW(load_hf_weights(model, all, "ok"));
  auto missing = all;
  missing.pop_back();
  try {
    load_hf_weights(model, missing, "model.safetensors");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors: no tensor 'lm_head.weight'"), std::string::npos) << e.what();
  }
  auto wrong = all;
  wrong[0].second = torch::zeros({3, 3});
  EXPECT_THROW(load_hf_weights(model, wrong, "x"), IoError);
  auto unknown = all;
  unknown.emplace_back("transformer.wte.weight", torch::zeros({1}));
  try {
    load_hf_weights(model, unknown, "model-00002-of-00002.safetensors");
    FAIL();
  } catch (const IoError& e) {  // the shard that holds it is named
    EXPECT_NE(std::string(e.what()).find("model-00002-of-00002.safetensors: "), std::string::npos) << e.what();
  }
  auto with_inv_freq = all;
  with_inv_freq.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", torch::zeros({8}));
  EXPECT_NO_THROW(load_hf_weights(model, with_inv_freq, "x"));
}

}  // namespace
}  // namespace hwt
