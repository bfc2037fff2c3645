// tied_embedding_lookup (model/tied_embedding.h): its values are torch::embedding's; its gradient
// alone is sparse and, made dense, equals the dense backward's to the bit (fp32, bf16, fp16, ids
// repeated many times, one and two threads); added to a head's gradient for the same weight it
// leaves a dense gradient equal to the bit to the plain lookup's. In the GPT: forward_loss uses it
// under a tied head, with every parameter's gradient equal to the plain path's (hidden_states alone),
// and an untied head (llama) or a lookup no head follows keeps the dense gradient; so under tensor
// parallelism (the vocabulary-parallel lookup paired with the head's shard, two thread ranks), rank
// by rank, and in a one-stage pipeline stage.
#include <gtest/gtest.h>

#include "hwtrain/model/gpt.h"
#include "hwtrain/model/gpt_stage.h"
#include "hwtrain/model/tied_embedding.h"
#include "model/model_test_util.h"
#include "support/thread_comm.h"

namespace hwt {
namespace {

// Ids drawn from the first `distinct` rows (few distinct rows: long sums per row).
torch::Tensor ids(int64_t distinct, int64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(distinct, {4, 96}, torch::kLong);
}

TEST(TiedEmbedding, AloneItsGradientIsSparseAndEqualsTheDenseBackwardsToTheBit) {
  const int threads_before = torch::get_num_threads();
  for (int threads : {1, 2}) {  // 4000 rows: the dense kernel splits them (grain 1000) over 2 threads
    torch::set_num_threads(threads);
    for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      for (int64_t distinct : {3, 40, 4000}) {
        const torch::Tensor idx = ids(distinct, distinct);
        const torch::Tensor w = torch::randn({4000, 24}).to(dtype).requires_grad_();
        const torch::Tensor g = torch::randn({4, 96, 24}).to(dtype);
        bool coalesced = false;  // as handed over (a leaf's accumulated copy drops the flag)
        w.register_hook([&coalesced](const torch::Tensor& grad) { coalesced = grad.is_coalesced(); });
        const torch::Tensor out = tied_embedding_lookup(idx, w);
        ASSERT_TRUE(torch::equal(out, torch::embedding(w, idx)));
        out.backward(g);
        ASSERT_TRUE(w.grad().is_sparse());
        EXPECT_TRUE(coalesced);
        EXPECT_LE(w.grad()._nnz(), distinct);
        const torch::Tensor want = at::embedding_dense_backward(g, idx, 4000, -1, false);
        EXPECT_TRUE(torch::equal(w.grad().to_dense(), want)) << dtype << " distinct " << distinct;
      }
    }
  }
  torch::set_num_threads(threads_before);
}

enum class Lookup { Plain, Sparse, Paired };

// The head's logits over the same weight, with the plain embedding, the lookup, or the lookup paired
// with the head; the weight's gradient. `head_grad`: where the head's gradient was made (its data).
torch::Tensor tied_gradient(Lookup lookup, torch::Dtype dtype, const torch::Tensor& idx,
                            const void** head_grad = nullptr) {
  torch::manual_seed(3);
  const torch::Tensor w = torch::randn({300, 16}).to(dtype).requires_grad_();
  c10::intrusive_ptr<TiedGradientSlot> slot;
  if (lookup == Lookup::Paired) slot = c10::make_intrusive<TiedGradientSlot>();
  const torch::Tensor x = lookup == Lookup::Plain ? torch::embedding(w, idx) : tied_embedding_lookup(idx, w, slot);
  torch::Tensor head = slot ? tied_head_weight(w, slot) : w;
  if (head_grad && slot) {
    head.register_hook([head_grad](const torch::Tensor& g) { *head_grad = g.data_ptr(); });
  }
  const torch::Tensor logits = torch::matmul(torch::tanh(x), head.t());
  logits.to(torch::kFloat).logsumexp(-1).sum().backward();
  return w.grad();
}

TEST(TiedEmbedding, WithTheHeadTheWeightsGradientIsDenseAndUnchanged) {
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (int64_t distinct : {5, 300}) {
      const torch::Tensor idx = ids(distinct, 7);
      const torch::Tensor dense = tied_gradient(Lookup::Plain, dtype, idx);
      for (const Lookup lookup : {Lookup::Sparse, Lookup::Paired}) {
        const torch::Tensor g = tied_gradient(lookup, dtype, idx);
        ASSERT_FALSE(g.is_sparse());
        EXPECT_TRUE(torch::equal(g, dense))
            << dtype << " distinct " << distinct << " paired " << (lookup == Lookup::Paired);
      }
    }
  }
}

// Paired, the head's gradient is the weight's gradient: the rows are added into it in place, where
// autograd's own dense + sparse sum would make a second vocabulary x width tensor.
TEST(TiedEmbedding, PairedTheRowsAreAddedIntoTheHeadsGradientInPlace) {
  const torch::Tensor idx = ids(5, 7);
  const void* head = nullptr;
  const torch::Tensor g = tied_gradient(Lookup::Paired, torch::kFloat, idx, &head);
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(g.data_ptr(), head);
}

// A slot whose lookup's graph was freed unrun (a forward that threw between the lookup and the head,
// then a head over other hidden states): the head keeps its gradient instead of handing it to a lookup
// whose backward will never run.
TEST(TiedEmbedding, AHeadPairedWithAFreedLookupKeepsItsGradient) {
  const torch::Tensor w = torch::randn({300, 16}).requires_grad_();
  const auto slot = c10::make_intrusive<TiedGradientSlot>();
  (void)tied_embedding_lookup(ids(5, 7), w, slot);  // its graph dies with the result
  const torch::Tensor h = torch::randn({8, 16});
  torch::matmul(h, tied_head_weight(w, slot).t()).logsumexp(-1).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  const torch::Tensor plain = w.detach().clone().requires_grad_();
  torch::matmul(h, plain.t()).logsumexp(-1).sum().backward();
  EXPECT_TRUE(torch::equal(w.grad(), plain.grad()));
  EXPECT_FALSE(slot->head_grad.defined());
}

TEST(TiedEmbedding, TheGptsForwardLossKeepsEveryGradientToTheBit) {
  for (int family = 0; family < 3; ++family) {  // gpt2; llama untied (the plain lookup); llama tied
    ModelConfig cfg = test::tiny_config();
    if (family > 0) cfg.architecture = Architecture::kLlama;
    cfg.tie_word_embeddings = family == 2;
    torch::manual_seed(1);
    GPT model(cfg, 64);
    const torch::Tensor idx = torch::randint(8, {3, 16}, torch::kLong), targets = torch::randint(64, {3, 16});
    const torch::Tensor loss = model->forward_loss(idx, targets);  // the lookup, under a tied head
    EXPECT_EQ(test::count_graph_nodes(loss, "TiedEmbeddingLookup"), family == 1 ? 0 : 1);
    loss.backward();
    const auto fused = test::grads_of(model);
    EXPECT_FALSE(model->wte->weight.grad().is_sparse());
    model->zero_grad();
    const torch::Tensor plain_loss = model->head_loss(model->hidden_states(idx), targets);  // the plain lookup
    EXPECT_EQ(test::count_graph_nodes(plain_loss, "TiedEmbeddingLookup"), 0);
    plain_loss.backward();
    const auto plain = test::grads_of(model);
    ASSERT_EQ(fused.size(), plain.size());
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(torch::equal(fused[i], plain[i])) << "parameter " << i;

    model->zero_grad();
    model->hidden_states(idx).sum().backward();  // no head at all: a dense gradient still
    EXPECT_FALSE(model->wte->weight.grad().is_sparse());
  }
}

// A one-stage pipeline stage (its only chunk takes the tokens and computes the loss) uses the lookup
// as forward_loss does, every gradient equal to the bit to the whole GPT's; a chunk without the head
// (two stages' first) keeps the dense lookup.
TEST(TiedEmbedding, AOneStagePipelineUsesItAndKeepsEveryGradientToTheBit) {
  const ModelConfig cfg = test::tiny_config();
  torch::manual_seed(1);
  GPT whole(cfg, 64);
  torch::manual_seed(1);
  GPT staged(cfg, 64);
  testing::ThreadGroup one(1);
  GptStage stage(staged, StagePlace{0, 1, {{0, cfg.n_layer}}}, std::make_shared<testing::ThreadComm>(one, 0), nullptr);
  ASSERT_TRUE(stage.takes_tokens(0) && stage.computes_loss(0));
  const torch::Tensor idx = torch::randint(8, {3, 16}, torch::kLong), targets = torch::randint(64, {3, 16});
  whole->forward_loss(idx, targets).backward();
  const torch::Tensor loss = stage.forward_stage(idx, targets, 0);
  EXPECT_EQ(test::count_graph_nodes(loss, "TiedEmbeddingLookup"), 1);
  loss.backward();
  auto reference = whole->named_parameters();
  for (const auto& item : stage.module().named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_FALSE(item.value().grad().is_sparse()) << item.key();
    EXPECT_TRUE(torch::equal(item.value().grad(), reference[item.key()].grad())) << item.key();
  }

  torch::manual_seed(1);
  GPT first(cfg, 64);
  testing::ThreadGroup two(2);
  GptStage head_elsewhere(first, StagePlace{0, 2, {{0, cfg.n_layer / 2}}},
                          std::make_shared<testing::ThreadComm>(two, 0), nullptr);
  EXPECT_EQ(test::count_graph_nodes(head_elsewhere.forward_stage(idx, targets, 0), "TiedEmbeddingLookup"), 0);
}

TEST(TiedEmbedding, TheVocabularyParallelLookupKeepsEachRanksGradientsToTheBit) {
  ModelConfig cfg = test::tiny_config();
  cfg.n_head = 4;
  testing::ThreadGroup group(2);
  std::vector<GPT> models;
  for (int r = 0; r < 2; ++r) {
    torch::manual_seed(7);
    models.emplace_back(cfg, 61);  // a vocabulary the ranks cut unevenly
    models.back()->set_tensor_parallel(std::make_shared<testing::ThreadComm>(group, r));
  }
  torch::manual_seed(2);
  const torch::Tensor idx = torch::randint(61, {3, 16}, torch::kLong), targets = torch::randint(61, {3, 16});
  std::vector<std::vector<torch::Tensor>> fused(2), plain(2);
  for (const auto& e : testing::run_ranks(group, [&](int r) {
         const torch::Tensor loss = models[r]->forward_loss(idx, targets);
         EXPECT_EQ(test::count_graph_nodes(loss, "TiedEmbeddingLookup"), 1);
         EXPECT_EQ(test::count_graph_nodes(loss, "TiedHeadWeight"), 1);  // paired: the rows summed in place
         loss.backward();
         fused[r] = test::grads_of(models[r]);
         models[r]->zero_grad();
         models[r]->head_loss(models[r]->hidden_states(idx), targets).backward();
         plain[r] = test::grads_of(models[r]);
       })) {
    ASSERT_EQ(e, "");
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(models[r]->wte->weight.grad().is_sparse());
    for (size_t i = 0; i < fused[r].size(); ++i) {
      EXPECT_TRUE(torch::equal(fused[r][i], plain[r][i])) << "rank " << r << " parameter " << i;
    }
  }
}

}  // namespace
}  // namespace hwt
