// GptStage::generate: decoding with the blocks cut over pipeline stages (model/gpt_stage.h), the
// rows in micro-batches that keep the stages busy at once.
//
// Overlapped (Gloo, and any transport whose sends do not wait for their receives): each step runs
// the stage's chunks in turn, each over every micro-batch in turn, so a stage passes micro-batch j
// on and takes up j + 1 while the next stage works on j. The last stage's token for micro-batch j
// goes back to the first stage, which receives it only when j's next step starts (other
// micro-batches run meanwhile); the stages in between need its shape alone and append a
// placeholder. A send is waited for before the next on its path (its receiver has posted by then:
// the step that followed needed it). Gloo's sends do not wait for their receives, so the opposite
// flows (activations on, tokens back) cannot block each other.
//
// In turn (NCCL: TensorParallelComm::sends_wait_for_receives): NCCL runs a pair's sends and
// receives in one order on one stream and a send waits for its receive, so the lazy token receive
// above could leave stage 0 sending an activation while the last stage sends it a token, each
// waiting for the other. There each micro-batch runs all its chunks and its token reaches every
// stage by an all-gather over the pipeline before the next micro-batch starts: the same tokens, one
// stage at a time.
#include <map>

#include "hwtrain/model/decoding.h"
#include "hwtrain/model/gpt_stage.h"

namespace hwt {

namespace stage_decoding {  // named: GptStage::Decoding holds one (-Wsubobject-linkage)

// Sends not waited for yet, by path (micro-batch, chunk; chunk = chunks for the token).
class PendingSends {
 public:
  void add(size_t micro_batch, int64_t chunk, std::function<void()> wait) {
    auto& slot = waits_[{micro_batch, chunk}];
    if (slot) slot();
    slot = std::move(wait);
  }
  void wait_all() {
    for (auto& entry : waits_) entry.second();
    waits_.clear();
  }

 private:
  std::map<std::pair<size_t, int64_t>, std::function<void()>> waits_;
};

}  // namespace stage_decoding

struct GptStage::Decoding {
  DecodeOptions options;
  double temperature = 1.0, top_p = 1.0;
  int64_t top_k = 0;
  std::optional<at::Generator> gen;
  torch::TensorOptions ids;  // the token ids' dtype and device
  std::vector<std::pair<int64_t, int64_t>> parts;  // each micro-batch's rows
  std::vector<torch::Tensor> rows;  // each micro-batch's tokens (between the first and last stage: their shape)
  std::vector<KVCache> caches, windows;  // windows: without a cache, the whole window from position 0
  std::vector<DecodeStep> steps;
  std::vector<std::function<torch::Tensor()>> token;  // micro-batch j's newest token, fetched when needed
  stage_decoding::PendingSends sends;
  int token_tag = 0;

  void take_token(size_t j) {
    if (!token[j]) return;
    rows[j] = torch::cat({rows[j], token[j]()}, 1);
    token[j] = nullptr;
  }
};

torch::Tensor GptStage::decode_chunk(Decoding& d, size_t j, int64_t chunk) {
  const ModelConfig& cfg = gpt_->config();
  if (chunk == 0) {
    d.take_token(j);
    d.steps[j] = next_decode_step(d.rows[j], d.options.use_cache ? &d.caches[j] : nullptr, d.options);
    if (d.steps[j].restart) d.caches[j].clear();  // positions start again at 0
  }
  KVCache& kv = d.options.use_cache ? d.caches[j] : d.windows[j];
  const BlockRange& blocks = place_.chunks[static_cast<size_t>(chunk)];
  const torch::Tensor& ids_BT = d.steps[j].ids_BT;
  torch::Tensor x;
  if (takes_tokens(chunk)) {
    x = gpt_->embed_at(ids_BT, kv.length);
  } else {  // in fp32, as training's activations travel, and back into the blocks' dtype
    const int prev = static_cast<int>((place_.index - 1 + place_.count) % place_.count);
    x = torch::empty({ids_BT.size(0), ids_BT.size(1), cfg.n_embd}, ids_BT.options().dtype(torch::kFloat));
    stages_->recv(x, prev, activation_tag(virtual_stage(chunk)));
    x = x.to(gpt_->h[blocks.begin]->parameters().front().scalar_type());
  }
  x = gpt_->blocks_cached(x, kv, blocks.begin, blocks.end);
  if (!computes_loss(chunk)) {
    const int next = static_cast<int>((place_.index + 1) % place_.count);
    auto wait = stages_->send_async(x.to(torch::kFloat).contiguous(), next, activation_tag(virtual_stage(chunk) + 1));
    stages_->sends_wait_for_receives() ? wait() : d.sends.add(j, chunk, std::move(wait));
    return torch::Tensor();
  }
  const torch::Tensor logits_BV = gpt_->logits_of(gpt_->norm_of(x.slice(1, -1))).select(1, -1);
  torch::Tensor next_B1 = sample_next(logits_BV, d.temperature, d.top_k, d.top_p, d.gen);
  // As GPT::generate: the tensor ranks' draws are the same; rank 0's is taken.
  if (TensorParallelComm* tp = gpt_->tensor_parallel()) next_B1 = tp->all_gather(next_B1).select(0, 0).contiguous();
  return next_B1;
}

void GptStage::decode_step_overlapped(Decoding& d) {
  const int last = static_cast<int>(place_.count - 1);
  for (int64_t chunk = 0; chunk < chunk_count(); ++chunk) {
    for (size_t j = 0; j < d.parts.size(); ++j) {
      const torch::Tensor sampled = decode_chunk(d, j, chunk);
      if (!sampled.defined()) continue;
      if (!is_first()) d.sends.add(j, chunk_count(), stages_->send_async(sampled, 0, d.token_tag));
      d.token[j] = [sampled] { return sampled; };
    }
  }
  // The stages that did not sample: the first receives the token, the others append a placeholder.
  for (size_t j = 0; j < d.parts.size(); ++j) {
    if (d.token[j]) continue;
    const auto like = torch::zeros({d.parts[j].second, 1}, d.ids);
    if (!is_first()) {
      d.token[j] = [like] { return like; };
      continue;
    }
    d.token[j] = [this, like, last, tag = d.token_tag] {
      torch::Tensor t = torch::empty_like(like);
      stages_->recv(t, last, tag);
      return t;
    };
  }
}

void GptStage::decode_step_in_turn(Decoding& d) {
  for (size_t j = 0; j < d.parts.size(); ++j) {
    torch::Tensor sampled;
    for (int64_t chunk = 0; chunk < chunk_count(); ++chunk) {
      const torch::Tensor t = decode_chunk(d, j, chunk);
      if (t.defined()) sampled = t;
    }
    if (!sampled.defined()) sampled = torch::zeros({d.parts[j].second, 1}, d.ids);
    const torch::Tensor everywhere = stages_->all_gather(sampled).select(0, place_.count - 1);  // the last stage's
    d.token[j] = [everywhere] { return everywhere; };
  }
}

torch::Tensor GptStage::generate(torch::Tensor idx_BT, int64_t max_new_tokens, double temperature, int64_t top_k,
                                 std::optional<at::Generator> gen, double top_p, bool use_cache, int64_t micro_batches) {
  check_decode_arguments(idx_BT, max_new_tokens, temperature, top_p, micro_batches);
  TrainingModeGuard mode(*gpt_);
  WholeSequenceGuard whole_sequence(gpt_->tensor_parallel());  // each stage's tensor group decodes split too
  gpt_->eval();
  torch::NoGradGuard no_grad;
  const ModelConfig& cfg = gpt_->config();
  Decoding d;
  d.options = {max_new_tokens, cfg.block_size, cfg.n_layer, use_cache, micro_batches};
  d.temperature = temperature;
  d.top_p = top_p;
  d.top_k = top_k;
  d.gen = std::move(gen);
  d.ids = idx_BT.options();
  d.parts = micro_batch_rows(idx_BT.size(0), micro_batches);
  const size_t m = d.parts.size();
  for (const auto& [first_row, count] : d.parts) d.rows.push_back(idx_BT.narrow(0, first_row, count));
  d.caches.assign(m, KVCache(cfg.n_layer));
  d.steps.resize(m);
  d.token.resize(m);
  d.token_tag = activation_tag(place_.count * chunk_count());  // past every virtual stage's
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    d.windows.assign(m, KVCache(cfg.n_layer));
    stages_->sends_wait_for_receives() ? decode_step_in_turn(d) : decode_step_overlapped(d);
    for (size_t j = 0; j < m; ++j) {
      if (use_cache) d.caches[j].length += d.steps[j].ids_BT.size(1);
    }
  }
  for (size_t j = 0; j < m; ++j) d.take_token(j);
  d.sends.wait_all();
  return stages_->all_gather(torch::cat(d.rows, 0).contiguous()).select(0, place_.count - 1);  // the last stage's
}

}  // namespace hwt
