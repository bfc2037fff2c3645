// GptStage::generate: decoding with the blocks cut over pipeline stages (model/gpt_stage.h).
#include "hwtrain/model/decoding.h"
#include "hwtrain/model/gpt_stage.h"

namespace hwt {

torch::Tensor GptStage::generate(torch::Tensor idx_BT, int64_t max_new_tokens, double temperature, int64_t top_k,
                                 std::optional<at::Generator> gen, double top_p, bool use_cache) {
  check_decode_arguments(idx_BT, max_new_tokens, temperature, top_p);
  TrainingModeGuard mode(*gpt_);
  WholeSequenceGuard whole_sequence(gpt_->tensor_parallel());  // each stage's tensor group decodes split too
  gpt_->eval();
  torch::NoGradGuard no_grad;
  const ModelConfig& cfg = gpt_->config();
  const int prev = static_cast<int>((place_.index - 1 + place_.count) % place_.count);
  const int next = static_cast<int>((place_.index + 1) % place_.count);
  auto step = [&](const torch::Tensor& ids_BT, KVCache* cache) {
    KVCache window(cfg.n_layer);  // without a cache: the whole window, from position 0
    KVCache& kv = cache ? *cache : window;
    const int64_t B = ids_BT.size(0), T = ids_BT.size(1);
    torch::Tensor next_B1 = torch::zeros({B, 1}, ids_BT.options());
    for (int64_t chunk = 0; chunk < chunk_count(); ++chunk) {
      const BlockRange& blocks = place_.chunks[static_cast<size_t>(chunk)];
      torch::Tensor x;
      if (takes_tokens(chunk)) {
        x = gpt_->embed_at(ids_BT, kv.length);
      } else {  // in fp32, as training's activations travel, and back into the blocks' dtype
        x = torch::empty({B, T, cfg.n_embd}, ids_BT.options().dtype(torch::kFloat));
        stages_->recv(x, prev, activation_tag(virtual_stage(chunk)));
        x = x.to(gpt_->h[blocks.begin]->parameters().front().scalar_type());
      }
      x = gpt_->blocks_cached(x, kv, blocks.begin, blocks.end);
      if (!computes_loss(chunk)) {
        stages_->send_async(x.to(torch::kFloat).contiguous(), next, activation_tag(virtual_stage(chunk) + 1))();
        continue;
      }
      const torch::Tensor logits_BV = gpt_->logits_of(gpt_->norm_of(x.slice(1, -1))).select(1, -1);
      next_B1 = sample_next(logits_BV, temperature, top_k, top_p, gen);
      // As GPT::generate: the tensor ranks' draws are the same; rank 0's is taken.
      if (TensorParallelComm* tp = gpt_->tensor_parallel()) next_B1 = tp->all_gather(next_B1).select(0, 0);
    }
    kv.length += T;
    return stages_->all_gather(next_B1).select(0, place_.count - 1);  // the last stage's token, everywhere
  };
  return decode_tokens(std::move(idx_BT), {max_new_tokens, cfg.block_size, cfg.n_layer, use_cache}, step);
}

}  // namespace hwt
