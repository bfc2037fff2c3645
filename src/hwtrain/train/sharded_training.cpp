#include "hwtrain/train/sharded_training.h"

#include <algorithm>
#include <map>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/zero1.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/train/blockwise_quant.h"
#include "hwtrain/train/sharded_checkpoint_reader.h"

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
  void release(size_t unit) override {
    if (auto e = engine_.lock()) e->release(unit);
  }
  void begin_forward() override {
    if (auto e = engine_.lock()) e->begin_forward();
  }
  torch::Tensor gather_for_backward(size_t unit, const torch::Tensor& out) override {
    auto e = engine_.lock();
    return e ? e->gather_for_backward(unit, out) : out;
  }
  void before_reuse(size_t unit) override {
    if (auto e = engine_.lock()) e->before_reuse(unit);
  }
  torch::Tensor release_after_backward(size_t unit, const torch::Tensor& in) override {
    auto e = engine_.lock();
    return e ? e->release_after_backward(unit, in) : in;
  }

 private:
  std::weak_ptr<ShardedParameters> engine_;
};

// Codes and block scales of a segment's moment as the checkpoint holds them, by the moment's key
// ("exp_avg.<param>@<offset>"): an 8-bit checkpoint resumed on its world size.
using StoredCodes = std::map<std::string, std::pair<torch::Tensor, torch::Tensor>>;

// The segments' state with each moment the checkpoint holds in 8 bits for exactly that segment as
// its codes and scales as stored, in place of their dequantized values, so that the resumed run
// continues bit for bit.
NamedTensors as_stored(NamedTensors state, const StoredCodes& stored) {
  NamedTensors out;
  for (auto& [name, t] : state) {
    auto it = stored.find(name);
    if (it == stored.end()) {
      out.emplace_back(name, std::move(t));
      continue;
    }
    const size_t dot = name.find('.') + 1;  // after "exp_avg." or "exp_avg_sq."
    const std::string moment = name.substr(0, dot), segment = name.substr(dot);
    out.emplace_back(eight_bit_codes_key(moment, segment), it->second.first);
    out.emplace_back(eight_bit_scales_key(moment, segment), it->second.second);
  }
  return out;
}

// This rank's segments of a sharded checkpoint's master weights and AdamW state, read from the
// shard files holding them; every rank learns whether all of them succeeded.
void load_own_segments(ShardedParameters& engine, AdamW& optimizer, ShardedCheckpointReader& shards, ProcessGroup& group) {
  std::string error;
  try {
    torch::NoGradGuard no_grad;
    for (const auto& seg : engine.segments()) seg.master.copy_(shards.read("model." + seg.param, seg.offset, seg.master.numel()));
    StoredCodes stored;  // read once: the codes themselves, not also their dequantized values
    NamedTensors state = engine.shard_state([&](const std::string& key, int64_t offset, int64_t count) {
      if (count > 0) {
        if (auto q = shards.eight_bit("optimizer." + key, offset, count)) {
          stored[key + "@" + std::to_string(offset)] = std::move(*q);
          return torch::zeros({count});  // stands in until as_stored puts the codes in its place
        }
      }
      return shards.read("optimizer." + key, offset, count);
    });
    optimizer.load_state(as_stored(std::move(state), stored));
  } catch (const std::exception& e) {  // anything (an IoError, out of memory): every rank must reach the agreement
    error = e.what();
  } catch (...) {
    error = "an unknown error reading this rank's part of checkpoint " + shards.dir().string();
  }
  const bool any_failed = group.any_rank(!error.empty(), "agreeing that every rank read its part of the checkpoint");
  if (!error.empty()) throw IoError(error);
  if (any_failed) {
    throw IoError("another rank could not read its part of checkpoint " + shards.dir().string() + " (its log names the file)");
  }
  engine.after_step();  // the parameters from the masters read: ZeRO-2 gathers them, ZeRO-3 frees them
  // Every rank says what it read.
  const double mib = static_cast<double>(shards.bytes_read()) / (1 << 20);
  const double checked = static_cast<double>(shards.bytes_checked()) / (1 << 20);
  if (shards.whole_checkpoint()) {
    logger().info("read this rank's segments of the one-process checkpoint {} ({:.1f} MiB; checksums of {:.1f} MiB checked)",
                  shards.dir().string(), mib, checked);
  } else {
    logger().info("read this rank's segments from {} of the {} shard files of {} ({:.1f} MiB; checksums of {:.1f} MiB checked)",
                  shards.files_read().size(), shards.world_size(), shards.dir().string(), mib, checked);
  }
}

// A model split over ranks: the gradient norm and fp16's verdict summed over the data group and then
// the model's groups (the shares of weights several model-parallel ranks hold, from the gradient
// shards), and whole checkpoints: the state and masters gathered over the data group, then joined
// by the model (Trainer::save_checkpoint).
void split_model_parts(OptimizerSharding& s, TrainableModel& model, const std::shared_ptr<ShardedParameters>& engine,
                       const std::shared_ptr<ProcessGroup>& group) {
  TrainableModel* m = &model;  // the trainer's, which outlives its sharding
  s.global_norm = [engine, m](const torch::Tensor& local) {
    torch::NoGradGuard no_grad;
    const torch::Tensor l = local.to(torch::kFloat);
    torch::Tensor squared = m->squared_norm_share(l * l, *engine->gradient_shards()).reshape({1}).contiguous();
    engine->sum_across_ranks(squared);
    m->model_parallel_sum(squared);
    return squared[0].clamp_min(0).sqrt();
  };
  s.sum_across_ranks = [engine, m](torch::Tensor& t) {
    engine->sum_across_ranks(t);
    m->model_parallel_sum(t);
  };
  s.gather = [engine, group](const NamedTensors& local) {
    NamedTensors all = gather_optimizer_state(local, *group);
    return group->rank() == 0 ? engine->unshard_state(all) : NamedTensors{};
  };
  s.master_weights = [engine] { return engine->full_parameters(); };
}

// A whole optimizer state whose moments are 8-bit (an int8 run's checkpoint) with fp32 moments,
// which shard_state cuts; each shard's AdamW quantizes its own blocks again.
NamedTensors with_fp32_moments(NamedTensors state) {
  std::map<std::string, torch::Tensor> scales;  // by their key
  for (const auto& [name, t] : state) {
    if (parse_eight_bit_key(name).scales) scales[name] = t;
  }
  if (scales.empty()) return state;
  NamedTensors out;
  for (auto& [name, t] : state) {
    const EightBitKey q8 = parse_eight_bit_key(name);
    if (q8.scales) continue;  // used with its codes
    if (!q8.codes) {
      out.emplace_back(name, std::move(t));
      continue;
    }
    auto it = scales.find(q8.scales_key);
    if (it == scales.end()) throw IoError("optimizer state '" + name + "' lacks its block scales");
    out.emplace_back(q8.moment, dequantize_blockwise({t.reshape(-1).to(torch::kUInt8), it->second.reshape(-1).to(torch::kFloat)},
                                                     q8.is_signed));
  }
  return out;
}

}  // namespace

ShardedTraining shard_training(TrainableModel& model, const AdamW& whole, const std::shared_ptr<ProcessGroup>& group,
                               ShardStage stage, Precision precision, ResumedState resumed, ReduceDtype reduce) {
  std::vector<ShardedUnitParams> units;
  for (auto& u : model.parameter_units()) units.push_back({u.name, u.params, u.initial_value});
  ShardingOptions options;
  options.stage = stage;
  options.compute_dtype = precision == Precision::Bf16   ? torch::kBFloat16
                          : precision == Precision::Fp16 ? torch::kHalf
                                                         : torch::kFloat;
  options.reduce_dtype = reduce == ReduceDtype::Bf16 ? torch::kBFloat16 : torch::kFloat;
  // Before the dtype changes; 8-bit moments (an int8 checkpoint's) whole in fp32, to be cut.
  NamedTensors whole_state = with_fp32_moments(resumed.empty() ? whole.state() : std::move(resumed.optimizer));
  auto engine = std::make_shared<ShardedParameters>(group, std::move(units), options);
  // ZeRO-3 gathers each unit through the hooks (a model without them refuses here); under ZeRO-2 they
  // do nothing, and a model without them is fine.
  if (model.supports_unit_hooks() || stage == ShardStage::Zero3) model.set_unit_hooks(std::make_shared<EngineHooks>(engine));

  std::vector<std::pair<std::string, torch::Tensor>> decay, no_decay;
  for (const auto& seg : engine->segments()) (whole.decays(seg.param) ? decay : no_decay).emplace_back(seg.name(), seg.master);
  AdamWOptions shard_options = whole.options();
  shard_options.defer_state = false;  // the shard's moments are small, and a checkpoint always holds them
  auto optimizer = std::make_shared<AdamW>(decay, no_decay, shard_options);
  if (resumed.shards) load_own_segments(*engine, *optimizer, *resumed.shards, *group);
  else if (!whole_state.empty()) optimizer->load_state(engine->shard_state(whole_state));  // resumed: cut to the shards
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
  s.after_step = [engine] { engine->after_step(); };
  if (model.model_parallel()) {
    split_model_parts(s, model, engine, group);
    return out;
  }
  s.global_norm = [engine](const torch::Tensor& local) { return engine->global_norm(local); };
  s.sum_across_ranks = [engine](torch::Tensor& t) { engine->sum_across_ranks(t); };
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
