#include "hwtrain/train/sharded_training.h"

#include "hwtrain/core/error.h"

namespace hwt {

namespace {

// The model's UnitHooks, forwarded to the engine while it exists.
class EngineHooks : public UnitHooks {
 public:
  explicit EngineHooks(std::weak_ptr<ShardedParameters> engine) : engine_(std::move(engine)) {}
  void before_forward(size_t unit) override {
    if (auto e = engine_.lock()) e->before_forward(unit);
  }
  torch::Tensor after_forward(size_t unit, const torch::Tensor& out) override {
    auto e = engine_.lock();
    return e ? e->after_forward(unit, out) : out;
  }

 private:
  std::weak_ptr<ShardedParameters> engine_;
};

}  // namespace

ShardedTraining shard_training(TrainableModel& model, const AdamW& whole, const std::shared_ptr<ProcessGroup>& group,
                               ShardStage stage, Precision precision, NamedTensors resumed) {
  std::vector<ShardedUnitParams> units;
  for (auto& u : model.parameter_units()) units.push_back({u.name, u.params});
  ShardingOptions options;
  options.stage = stage;
  options.compute_dtype = precision == Precision::Bf16   ? torch::kBFloat16
                          : precision == Precision::Fp16 ? torch::kHalf
                                                         : torch::kFloat;
  NamedTensors whole_state = resumed.empty() ? whole.state() : std::move(resumed);  // before the parameters change dtype
  auto engine = std::make_shared<ShardedParameters>(group, std::move(units), options);
  // ZeRO-3 gathers each unit through the hooks (a model without them refuses here); ZeRO-2 needs none.
  if (model.supports_unit_hooks() || stage == ShardStage::Zero3) model.set_unit_hooks(std::make_shared<EngineHooks>(engine));

  std::vector<std::pair<std::string, torch::Tensor>> decay, no_decay;
  for (const auto& seg : engine->segments()) (whole.decays(seg.param) ? decay : no_decay).emplace_back(seg.name(), seg.master);
  AdamWOptions shard_options = whole.options();
  shard_options.defer_state = false;  // the shard's moments are small, and a checkpoint always holds them
  auto optimizer = std::make_shared<AdamW>(decay, no_decay, shard_options);
  if (!whole_state.empty()) optimizer->load_state(engine->shard_state(whole_state));  // resumed: cut to the shards
  whole_state.clear();

  ShardedTraining out;
  out.engine = engine;
  OptimizerSharding& s = out.sharding;
  s.optimizer = optimizer;
  s.parameters = [engine] {
    std::vector<torch::Tensor> params;
    for (const auto& seg : engine->segments()) params.push_back(seg.master);
    return params;
  };
  s.global_norm = [engine](const torch::Tensor& local) { return engine->global_norm(local); };
  s.sum_across_ranks = [engine](torch::Tensor& t) { engine->sum_across_ranks(t); };
  s.after_step = [engine] { engine->after_step(); };
  s.local_weights = [engine] {
    NamedTensors mine;
    for (const auto& seg : engine->segments()) mine.emplace_back(seg.name(), seg.master);
    return mine;
  };
  s.share_from_rank0 = [group](const std::string& key, const std::string& value) {
    return group->share_from_rank0(key, value);
  };
  s.barrier = [group](const std::string& what) { group->barrier(what); };
  return out;
}

}  // namespace hwt
