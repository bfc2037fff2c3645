#include "hwtrain/model/gpt_stage.h"

#include <algorithm>
#include <set>
#include <unordered_set>

#include "hwtrain/core/error.h"
#include "hwtrain/model/gpt_model.h"

namespace hwt {
namespace {

// Optimizer state is named "<kind>.<parameter>"; checkpoints carry these kinds (8-bit moments are refused upstream).
const std::vector<std::string> kStateKinds{"", "exp_avg.", "exp_avg_sq.", "step."};

class ModuleGroup : public torch::nn::Module {};  // a holder that only names its children

// The GPT's unit hooks (its units: the embeddings or tied rest, the blocks, the head) carried out
// by an engine whose units are a stage's (GptStage::parameter_units): each GPT unit maps to the
// stage's units holding its parameters here (the tied rest: its remainder and the tied embedding).
class StageUnitHooks : public UnitHooks {
 public:
  StageUnitHooks(std::shared_ptr<UnitHooks> engine, std::vector<std::vector<size_t>> units)
      : engine_(std::move(engine)), units_(std::move(units)) {}
  void before_forward(size_t unit) override {
    for (size_t k : of(unit)) engine_->before_forward(k);
  }
  torch::Tensor after_forward(size_t unit, const torch::Tensor& out) override {
    torch::Tensor x = out;
    for (size_t k : of(unit)) x = engine_->after_forward(k, x);
    return x;
  }
  void release(size_t unit) override {
    for (size_t k : of(unit)) engine_->release(k);
  }
  void begin_forward() override { engine_->begin_forward(); }
  torch::Tensor gather_for_backward(size_t unit, const torch::Tensor& out) override {
    torch::Tensor x = out;
    for (size_t k : of(unit)) x = engine_->gather_for_backward(k, x);
    return x;
  }
  void before_reuse(size_t unit) override {
    for (size_t k : of(unit)) engine_->before_reuse(k);
  }
  torch::Tensor release_after_backward(size_t unit, const torch::Tensor& in) override {
    torch::Tensor x = in;
    for (size_t k : of(unit)) x = engine_->release_after_backward(k, x);
    return x;
  }

 private:
  const std::vector<size_t>& of(size_t unit) const {
    TORCH_CHECK(unit < units_.size() && !units_[unit].empty(), "GptStage: the model's unit ", unit,
                " has no parameters on this pipeline stage");
    return units_[unit];
  }
  std::shared_ptr<UnitHooks> engine_;
  std::vector<std::vector<size_t>> units_;
};

}  // namespace

GptStage::GptStage(GPT gpt, StagePlace place, std::shared_ptr<TensorParallelComm> stages,
                   std::shared_ptr<TensorParallelComm> shared)
    : gpt_(std::move(gpt)), place_(place), stages_(std::move(stages)), shared_(std::move(shared)) {
  TORCH_CHECK(stages_ && stages_->size() == place_.count && stages_->rank() == place_.index,
              "GptStage: the pipeline group must have one rank per stage, this one at the stage's index");
  TORCH_CHECK(!place_.chunks.empty(), "GptStage: a stage holds at least one chunk of blocks");
  device_ = gpt_->wte->weight.device();
  for (const auto& item : gpt_->named_parameters()) {  // whole shapes, also of tensor-parallel shards
    std::vector<int64_t> shape = item.value().sizes().vec();
    const ShardSpec spec = gpt_->tensor_parallel_spec(item.key());
    if (spec.sharded()) shape[static_cast<size_t>(spec.dim)] = gpt_->whole_rows(item.key());
    whole_meta_.emplace_back(item.key(), torch::empty(shape, item.value().options().device(torch::kCPU)));
  }
  const ModelConfig& cfg = gpt_->config();
  const bool llama = cfg.is_llama(), first = is_first(), last = is_last();
  stage_ = std::make_shared<ModuleGroup>();
  if (first || (last && cfg.tied_head())) stage_->register_module(llama ? "embed_tokens" : "wte", gpt_->wte.ptr());
  if (first && gpt_->wpe) stage_->register_module("wpe", gpt_->wpe.ptr());
  auto blocks = std::make_shared<ModuleGroup>();
  for (const BlockRange& chunk : place_.chunks) {
    for (int64_t i = chunk.begin; i < chunk.end; ++i) blocks->register_module(std::to_string(i), gpt_->h[i]);
  }
  stage_->register_module(llama ? "layers" : "h", blocks);
  if (last) {
    if (gpt_->ln_f) stage_->register_module("ln_f", gpt_->ln_f.ptr());
    if (gpt_->norm) stage_->register_module("norm", gpt_->norm.ptr());
    if (gpt_->lm_head) stage_->register_module("lm_head", gpt_->lm_head.ptr());
  }
  // The other stages' weights are not this stage's to keep.
  std::unordered_set<const c10::TensorImpl*> mine;
  for (const auto& p : stage_->parameters()) mine.insert(p.unsafeGetTensorImpl());
  torch::NoGradGuard no_grad;
  for (auto& p : gpt_->parameters()) {
    if (!mine.count(p.unsafeGetTensorImpl())) p.set_data(torch::empty({0}, p.options()));
  }
}

bool GptStage::holds_tied_copy() const { return place_.count > 1 && is_last() && gpt_->config().tied_head(); }

torch::Tensor GptStage::forward_stage(const torch::Tensor& input, const torch::Tensor& targets, int64_t chunk) {
  if (gpt_->is_training() != stage_->is_training()) gpt_->train(stage_->is_training());
  const BlockRange& blocks = place_.chunks.at(static_cast<size_t>(chunk));
  // Activations travel in fp32; a stage whose weights compute in 16 bits (ZeRO-2's copies) takes them
  // back in its weights' dtype, as the stage before made them (exactly: the cast there was widening).
  // The unit hooks as GPT::hidden_states calls them (final_norm gathers the head's unit, or the tied
  // rest again), plus the head's gather for backward on the last stage.
  UnitHooks* hooks = gpt_->unit_hooks();
  const bool tied = gpt_->config().tied_head();
  if (hooks) hooks->begin_forward();
  torch::Tensor x;
  if (takes_tokens(chunk)) {
    // The head follows in this graph only on a one-stage pipeline (the first virtual stage is then
    // the last); otherwise the tied copy on the last stage gets the head's gradient.
    x = gpt_->embed(input, /*head_follows=*/computes_loss(chunk));
    if (hooks) hooks->release(0);  // the embeddings' backward reads only the token ids
  } else {
    x = input.to(gpt_->h[blocks.begin]->parameters().front().scalar_type());
  }
  x = gpt_->run_blocks(x, blocks.begin, blocks.end);
  if (!computes_loss(chunk)) return x;
  torch::Tensor loss = gpt_->head_loss(gpt_->final_norm(x), targets);
  return hooks ? hooks->gather_for_backward(tied ? 0 : static_cast<size_t>(gpt_->config().n_layer) + 1, loss) : loss;
}

std::vector<int64_t> GptStage::activation_shape(int64_t rows, int64_t row_elements) const {
  const TensorParallelComm* tp = gpt_->tensor_parallel();  // sequence parallel: this rank's slice of T
  return {rows, tp && tp->sequence_parallel ? row_elements / tp->size() : row_elements, gpt_->config().n_embd};
}

// Evaluation: the micro-batch through every stage (each chunk in turn), forward only; every stage
// returns the loss. Tagged by virtual stage, as the training schedule's activations are.
torch::Tensor GptStage::forward_loss(const torch::Tensor& x_BT, const torch::Tensor& y_BT) {
  TORCH_CHECK(!torch::GradMode::is_enabled(),
              "a pipeline stage trains through the pipeline schedule; forward_loss is for evaluation (no grad)");
  const int prev = static_cast<int>((place_.index - 1 + place_.count) % place_.count);
  const int next = static_cast<int>((place_.index + 1) % place_.count);
  torch::Tensor loss = torch::zeros({1}, x_BT.options().dtype(torch::kFloat));
  for (int64_t chunk = 0; chunk < chunk_count(); ++chunk) {
    torch::Tensor input = x_BT;
    if (!takes_tokens(chunk)) {
      input = torch::empty(activation_shape(x_BT.size(0), x_BT.size(1)), x_BT.options().dtype(torch::kFloat));
      stages_->recv(input, prev, activation_tag(virtual_stage(chunk)));
    }
    torch::Tensor out = forward_stage(input, y_BT, chunk);
    if (!computes_loss(chunk)) {
      stages_->send_async(out.to(torch::kFloat).contiguous(), next, activation_tag(virtual_stage(chunk) + 1))();
    } else {
      loss += out.to(torch::kFloat);
    }
  }
  stages_->all_reduce_sum(loss);  // the last stage's loss on every stage
  return loss[0];
}

void GptStage::named_decay_and_no_decay(NamedParameters& decay, NamedParameters& no_decay) {
  std::unordered_set<const c10::TensorImpl*> mine;
  for (const auto& p : stage_->parameters()) mine.insert(p.unsafeGetTensorImpl());
  NamedParameters all_decay, all_no_decay;
  gpt_->named_decay_and_no_decay(all_decay, all_no_decay);
  for (auto& [name, p] : all_decay) {
    if (mine.count(p.unsafeGetTensorImpl())) decay.emplace_back(name, p);
  }
  for (auto& [name, p] : all_no_decay) {
    if (mine.count(p.unsafeGetTensorImpl())) no_decay.emplace_back(name, p);
  }
}

bool GptStage::set_activation_checkpointing(int64_t every_k) {
  gpt_->set_activation_checkpointing(every_k);
  return true;
}

// This rank's share of a row's FLOPs: its stage's of the whole model's, split over its tensor group.
double GptStage::training_flops_per_row(int64_t row_elements) {
  const int64_t whole = GPTImpl::count_parameters(gpt_->config(), gpt_->vocab_size(), /*exclude_position_embedding=*/false);
  const double tp = gpt_->tensor_parallel() ? gpt_->tensor_parallel()->size() : 1;
  return training_flops_per_token(gpt_->config(), whole) * static_cast<double>(row_elements) /
         (static_cast<double>(place_.count) * tp);
}

// Tensor parallel first (the weights its group holds whole count 1/size each), then the last
// stage's copy of a tied embedding (its first stage counts it).
torch::Tensor GptStage::squared_norm_share(const torch::Tensor& local_squared, const NamedParameters& grads) {
  const torch::Tensor share = tensor_parallel_norm_share(*gpt_, local_squared, grads);
  if (!holds_tied_copy()) return share;
  const std::string tied = embedding_name();
  for (const auto& [name, g] : grads) {
    if (name != tied || !g.defined()) continue;
    torch::NoGradGuard no_grad;
    return share - g.to(local_squared.scalar_type()).pow(2).sum();
  }
  return share;
}

void GptStage::model_parallel_sum(torch::Tensor& t) {
  if (gpt_->tensor_parallel()) gpt_->tensor_parallel()->all_reduce_sum(t);
  stages_->all_reduce_sum(t);
}

bool GptStage::checkpoint_writer() const {
  return place_.index == 0 && (!gpt_->tensor_parallel() || gpt_->tensor_parallel()->rank() == 0);
}

std::string GptStage::embedding_name() const { return gpt_->config().is_llama() ? "embed_tokens.weight" : "wte.weight"; }

void GptStage::sum_shared_gradients(const NamedParameters& grads) {
  gpt_->sum_sequence_parallel_gradients(grads);
  if (!shares_embedding()) return;
  const std::string tied = embedding_name();
  for (const auto& [name, g] : grads) {
    if (name != tied) continue;
    torch::Tensor sum = g;  // a shard is a view of the engine's gradient: summed in place
    shared_->all_reduce_sum(sum);
    return;
  }
  // No gradient of it here (the stage's copy took none): zeros join the sum, and keep them.
  torch::Tensor& g = gpt_->wte->weight.mutable_grad();
  g = torch::zeros_like(gpt_->wte->weight);
  shared_->all_reduce_sum(g);
}

std::vector<ParameterUnit> GptStage::parameter_units() {
  std::unordered_set<const c10::TensorImpl*> mine;
  for (const auto& p : stage_->parameters()) mine.insert(p.unsafeGetTensorImpl());
  const c10::TensorImpl* tied = shares_embedding() ? gpt_->wte->weight.unsafeGetTensorImpl() : nullptr;
  std::vector<ParameterUnit> out;
  std::vector<ParameterUnit> units = gpt_->parameter_units();  // a deferred model's carry its initial values
  for (ParameterUnit& u : units) {
    ParameterUnit kept{u.name, {}, u.initial_value};
    for (auto& [name, p] : u.params) {
      if (mine.count(p.unsafeGetTensorImpl()) && p.unsafeGetTensorImpl() != tied) kept.params.emplace_back(name, p);
    }
    if (!kept.params.empty()) out.push_back(std::move(kept));
  }
  // In the order the stage runs them (ZeRO-3 prefetches the next): the last stage of a tied model
  // runs the rest of unit 0 (its final norm) and the embedding's copy after its blocks.
  if (!is_first() && gpt_->config().tied_head() && !out.empty() && out.front().name == units.front().name) {
    std::rotate(out.begin(), out.begin() + 1, out.end());
  }
  if (tied) {
    ParameterUnit copy{"tied-embedding", {{embedding_name(), gpt_->wte->weight}}, units.front().initial_value};
    out.insert(is_first() ? out.begin() : out.end(), std::move(copy));
  }
  return out;
}

void GptStage::set_unit_hooks(std::shared_ptr<UnitHooks> hooks) {
  if (!hooks) {
    gpt_->set_unit_hooks(nullptr);
    return;
  }
  const std::vector<ParameterUnit> whole = gpt_->parameter_units(), mine = parameter_units();
  std::vector<std::vector<size_t>> map(whole.size());
  for (size_t g = 0; g < whole.size(); ++g) {
    for (size_t k = 0; k < mine.size(); ++k) {
      if (mine[k].name == whole[g].name || (g == 0 && mine[k].name == "tied-embedding")) map[g].push_back(k);
    }
  }
  gpt_->set_unit_hooks(std::make_shared<StageUnitHooks>(std::move(hooks), std::move(map)));
}

// Every tensor the whole model's checkpoint names, in the whole model's order: each present on
// some stage (a count per name, summed over the stages), filled in by the stages that hold it and
// summed (a tied copy, held twice, averaged). Collective over the pipeline group.
NamedParameters GptStage::whole_tensors(NamedParameters local) {
  local = tensor_parallel_whole(*gpt_, std::move(local));  // this stage's tensors, whole (tensor group)
  std::map<std::string, torch::Tensor> have;
  for (auto& [name, t] : local) have[name] = t;
  std::vector<std::string> keys;
  std::vector<torch::Tensor> meta;
  for (const auto& [name, m] : whole_meta_) {
    for (const auto& kind : kStateKinds) {
      keys.push_back(kind + name);
      meta.push_back(m);
    }
  }
  std::set<std::string> known(keys.begin(), keys.end());
  for (const auto& [name, t] : local) {
    if (!known.count(name)) throw IoError("'" + name + "' has no place in a pipeline stage's checkpoint");
  }
  torch::Tensor count = torch::zeros({static_cast<int64_t>(keys.size()), 2}, torch::kFloat64);  // on the CPU: filled here
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = have.find(keys[i]);
    if (it == have.end()) continue;
    count[static_cast<int64_t>(i)][0] = 1;
    count[static_cast<int64_t>(i)][1] = static_cast<double>(static_cast<int>(it->second.scalar_type()));
  }
  count = count.to(device_);
  stages_->all_reduce_sum(count);
  count = count.cpu();
  NamedParameters out;
  for (size_t i = 0; i < keys.size(); ++i) {
    const double holders = count[static_cast<int64_t>(i)][0].item<double>();
    if (holders == 0) continue;
    const auto dtype = static_cast<c10::ScalarType>(static_cast<int>(count[static_cast<int64_t>(i)][1].item<double>() / holders));
    auto it = have.find(keys[i]);
    const bool step = keys[i].rfind("step.", 0) == 0;
    torch::Tensor t = it != have.end() ? it->second.detach().to(device_, dtype).clone()
                                       : torch::zeros(step ? std::vector<int64_t>{} : meta[i].sizes().vec(),
                                                      torch::TensorOptions().dtype(dtype).device(device_));
    stages_->all_reduce_sum(t);
    if (holders > 1) t.div_(holders);
    out.emplace_back(keys[i], t);
  }
  return out;
}

NamedParameters GptStage::local_tensors(NamedParameters whole) const {
  std::set<std::string> mine;
  for (const auto& item : stage_->named_parameters()) mine.insert(item.key());
  NamedParameters out;
  for (auto& [name, t] : whole) {
    for (const auto& kind : kStateKinds) {
      if (name.rfind(kind, 0) == 0 && mine.count(name.substr(kind.size()))) {
        out.emplace_back(name, t);
        break;
      }
    }
  }
  return tensor_parallel_local(*gpt_, std::move(out));
}

}  // namespace hwt
