// GptStage::generate: decoding with the blocks cut over pipeline stages (model/gpt_stage.h), the
// rows in micro-batches that keep the stages busy at once.
//
// Overlapped (Gloo, and any transport whose sends do not wait for their receives): each step runs the stage's chunks in turn, each over every
// micro-batch in turn, so a stage passes micro-batch j on and takes up j + 1 while the next stage
// works on j. The last stage's token for micro-batch j goes back to the first stage, which receives
// it only when j's next step starts (other micro-batches run meanwhile); the stages in between need
// its shape alone and append a placeholder. A send is waited for before the next on its path (its
// receiver has posted by then: the step that followed needed it). Gloo's sends do not wait for their
// receives, so the opposite flows (activations on, tokens back) cannot block each other.
//
// In turn (NCCL: TensorParallelComm::sends_wait_for_receives): NCCL runs a pair's sends and receives in one order on one stream and a
// send waits for its receive, so the lazy token receive above could leave stage 0 sending an
// activation while the last stage sends it a token, each waiting for the other. There each
// micro-batch runs all its chunks and its token reaches every stage by an all-gather over the
// pipeline before the next micro-batch starts: the same tokens, one stage at a time.
#include <map>

#include "hwtrain/model/decoding.h"
#include "hwtrain/model/gpt_stage.h"

namespace hwt {

namespace {

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

}  // namespace

torch::Tensor GptStage::generate(torch::Tensor idx_BT, int64_t max_new_tokens, double temperature, int64_t top_k,
                                 std::optional<at::Generator> gen, double top_p, bool use_cache, int64_t micro_batches) {
  check_decode_arguments(idx_BT, max_new_tokens, temperature, top_p, micro_batches);
  TrainingModeGuard mode(*gpt_);
  WholeSequenceGuard whole_sequence(gpt_->tensor_parallel());  // each stage's tensor group decodes split too
  gpt_->eval();
  torch::NoGradGuard no_grad;
  const ModelConfig& cfg = gpt_->config();
  const DecodeOptions options{max_new_tokens, cfg.block_size, cfg.n_layer, use_cache, micro_batches};
  const bool overlapped = !stages_->sends_wait_for_receives();
  const int prev = static_cast<int>((place_.index - 1 + place_.count) % place_.count);
  const int next = static_cast<int>((place_.index + 1) % place_.count), last = static_cast<int>(place_.count - 1);
  const int token_tag = activation_tag(place_.count * chunk_count());  // past every virtual stage's
  const auto parts = micro_batch_rows(idx_BT.size(0), micro_batches);
  const size_t m = parts.size();
  std::vector<torch::Tensor> rows;  // each micro-batch's tokens (between the first and last stage: their shape)
  for (const auto& [first_row, count] : parts) rows.push_back(idx_BT.narrow(0, first_row, count));
  std::vector<KVCache> caches(m, KVCache(cfg.n_layer)), windows;
  std::vector<DecodeStep> steps(m);
  std::vector<std::function<torch::Tensor()>> token(m);  // micro-batch j's newest token, fetched when needed
  PendingSends sends;
  auto take_token = [&](size_t j) {
    if (!token[j]) return;
    rows[j] = torch::cat({rows[j], token[j]()}, 1);
    token[j] = nullptr;
  };
  // Chunk `chunk` of micro-batch j's step; on the last virtual stage, its token (else undefined).
  auto run_chunk = [&](size_t j, int64_t chunk) {
    if (chunk == 0) {
      take_token(j);
      steps[j] = next_decode_step(rows[j], use_cache ? &caches[j] : nullptr, options);
      if (steps[j].restart) caches[j].clear();  // positions start again at 0
    }
    KVCache& kv = use_cache ? caches[j] : windows[j];  // without a cache: the whole window, from position 0
    const BlockRange& blocks = place_.chunks[static_cast<size_t>(chunk)];
    const torch::Tensor& ids_BT = steps[j].ids_BT;
    torch::Tensor x;
    if (takes_tokens(chunk)) {
      x = gpt_->embed_at(ids_BT, kv.length);
    } else {  // in fp32, as training's activations travel, and back into the blocks' dtype
      x = torch::empty({ids_BT.size(0), ids_BT.size(1), cfg.n_embd}, ids_BT.options().dtype(torch::kFloat));
      stages_->recv(x, prev, activation_tag(virtual_stage(chunk)));
      x = x.to(gpt_->h[blocks.begin]->parameters().front().scalar_type());
    }
    x = gpt_->blocks_cached(x, kv, blocks.begin, blocks.end);
    if (!computes_loss(chunk)) {
      auto wait = stages_->send_async(x.to(torch::kFloat).contiguous(), next, activation_tag(virtual_stage(chunk) + 1));
      overlapped ? sends.add(j, chunk, std::move(wait)) : wait();
      return torch::Tensor();
    }
    const torch::Tensor logits_BV = gpt_->logits_of(gpt_->norm_of(x.slice(1, -1))).select(1, -1);
    torch::Tensor next_B1 = sample_next(logits_BV, temperature, top_k, top_p, gen);
    // As GPT::generate: the tensor ranks' draws are the same; rank 0's is taken.
    if (TensorParallelComm* tp = gpt_->tensor_parallel()) next_B1 = tp->all_gather(next_B1).select(0, 0).contiguous();
    return next_B1;
  };
  // What the stages that did not sample append for micro-batch j (overlapped: the first receives it).
  auto later_token = [&](size_t j) -> std::function<torch::Tensor()> {
    const auto like = torch::zeros({parts[j].second, 1}, idx_BT.options());
    if (!is_first()) return [like] { return like; };
    return [this, like, last, token_tag] {
      torch::Tensor t = torch::empty_like(like);
      stages_->recv(t, last, token_tag);
      return t;
    };
  };
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    windows.assign(m, KVCache(cfg.n_layer));
    if (overlapped) {
      for (int64_t chunk = 0; chunk < chunk_count(); ++chunk) {
        for (size_t j = 0; j < m; ++j) {
          const torch::Tensor sampled = run_chunk(j, chunk);
          if (!sampled.defined()) continue;
          if (!is_first()) sends.add(j, chunk_count(), stages_->send_async(sampled, 0, token_tag));
          token[j] = [sampled] { return sampled; };
        }
      }
      for (size_t j = 0; j < m; ++j) {
        if (!token[j]) token[j] = later_token(j);
      }
    } else {
      for (size_t j = 0; j < m; ++j) {
        torch::Tensor sampled;
        for (int64_t chunk = 0; chunk < chunk_count(); ++chunk) {
          const torch::Tensor t = run_chunk(j, chunk);
          if (t.defined()) sampled = t;
        }
        if (!sampled.defined()) sampled = torch::zeros({parts[j].second, 1}, idx_BT.options());
        const torch::Tensor everywhere = stages_->all_gather(sampled).select(0, last);  // the last stage's token
        token[j] = [everywhere] { return everywhere; };
      }
    }
    for (size_t j = 0; j < m; ++j) {
      if (use_cache) caches[j].length += steps[j].ids_BT.size(1);
    }
  }
  for (size_t j = 0; j < m; ++j) take_token(j);
  sends.wait_all();
  return stages_->all_gather(torch::cat(rows, 0).contiguous()).select(0, last);  // the last stage's
}

}  // namespace hwt
