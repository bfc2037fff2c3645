#include "hwtrain/cli/split_model.h"

#include <functional>
#include <set>
#include <string>

#include "hwtrain/cli/run_setup.h"
#include "hwtrain/core/error.h"
#include "hwtrain/dist/device_mesh.h"
#include "hwtrain/dist/tensor_parallel_group.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/model/deferred_init.h"
#include "hwtrain/run/hardware_aware_optimizer.h"
#include "hwtrain/train/sharded_checkpoint.h"
#include "hwtrain/train/sharded_checkpoint_reader.h"

namespace hwt::cli {

namespace fs = std::filesystem;

namespace {

using TakeWeight = std::function<void(const std::string& name, const torch::Tensor& whole)>;

// The weights of `ckpt` that `wanted` (given every name) accepts, whole, one at a time: by range
// reads from a sharded checkpoint or a one-process one with AdamW state (fp32 or 8-bit moments);
// otherwise (no optimizer state yet, or one the reader cannot index) model.safetensors is loaded
// whole first.
void for_each_weight(const fs::path& ckpt, const std::function<bool(const std::string&)>& wanted, const TakeWeight& take) {
  std::shared_ptr<ShardedCheckpointReader> reader;
  if (fs::exists(ckpt / kShardingManifest)) {
    reader = std::make_shared<ShardedCheckpointReader>(ckpt);
  } else if (fs::exists(ckpt / "optimizer.safetensors")) {
    try {  // verified by the caller; the weights need none of the optimizer's entries
      reader = ShardedCheckpointReader::open_whole(ckpt, /*verify_on_read=*/false);
    } catch (const IoError&) {
      reader = nullptr;
    }
  }
  if (!reader) {
    for (const auto& [name, whole] : read_checkpoint_weights(ckpt)) {
      if (wanted(name)) take(name, whole);
    }
    return;
  }
  for (const auto& [name, shape] : reader->parameters()) {
    if (wanted(name)) take(name, reader->whole("model." + name));
  }
}

// `whole`, checked against what the split model's parameter `name` (this rank's shard) needs, cut
// (`comm`: the tensor group; null: none, the weight is kept whole).
torch::Tensor own_shard(GPT& model, const fs::path& ckpt, const std::string& name, const torch::Tensor& local,
                        const torch::Tensor& whole, const TensorParallelComm* comm) {
  const ShardSpec spec = comm ? model->tensor_parallel_spec(name) : ShardSpec{};
  std::vector<int64_t> shape = local.sizes().vec();
  if (spec.sharded()) shape[static_cast<size_t>(spec.dim)] = model->whole_rows(name);
  check_checkpoint_weight(ckpt, name, shape, whole);
  return spec.sharded() ? shard_of(whole, spec, comm->rank(), comm->size()) : whole;
}

}  // namespace

fs::path own_checkpoint(const std::string& spec, const std::string& out_dir) {
  fs::path ckpt = resolve_run_checkpoint(spec, out_dir);
  verify_checkpoint(ckpt);
  require_builtin_model_checkpoint(ckpt);
  return ckpt;
}

void check_checkpoint_weight(const fs::path& ckpt, const std::string& name, c10::IntArrayRef shape,
                             const torch::Tensor& value) {
  if (value.sizes() != shape) {
    throw IoError("checkpoint " + ckpt.string() + ": tensor '" + name + "' has shape " + c10::str(value.sizes()) +
                  ", the model needs " + c10::str(shape));
  }
  check_finite_weight(ckpt, name, value);
}

void check_finite_weight(const fs::path& ckpt, const std::string& name, const torch::Tensor& value) {
  if (!torch::isfinite(value).all().item<bool>()) {
    throw IoError("checkpoint " + ckpt.string() + ": tensor '" + name + "' holds NaN or infinite values (the run "
                  "diverged before this checkpoint); use an earlier checkpoint");
  }
}

IoError unknown_checkpoint_tensor(const fs::path& ckpt, const std::string& name) {
  return IoError("checkpoint " + ckpt.string() + " has tensor '" + name + "' the model lacks");
}

namespace {

// The (1 data x pipeline x tensor) mesh of `world` ranks, or ConfigError naming --pipeline.
DeviceMesh split_mesh(const ModelConfig& cfg, int world, int64_t pipeline) {
  const std::string what = "--pipeline " + std::to_string(pipeline) + " on " + std::to_string(world) + " ranks: ";
  if (pipeline < 1 || world % pipeline != 0) {
    throw ConfigError(what + "the stages must divide the ranks; valid: a divisor of " + std::to_string(world));
  }
  if (pipeline > cfg.n_layer) {
    throw ConfigError(what + "more stages than the model's " + std::to_string(cfg.n_layer) + " blocks");
  }
  try {
    DeviceMesh mesh(world, world / pipeline, pipeline);
    check_mesh_fits_model(mesh, cfg, /*pipeline_chunks=*/1);
    return mesh;
  } catch (const ConfigError& e) {  // the heads or the MLP width do not cut over the stage's ranks
    throw ConfigError(what + std::to_string(world / pipeline) + " tensor-parallel ranks a stage: " + e.what());
  }
}

}  // namespace

SplitModel load_split_model(const fs::path& ckpt, const DistEnv& env, int64_t pipeline, const ConfigOptions& options) {
  SplitModel s;
  s.config = resolve_config(options, ckpt);
  s.config.model.dropout = 0;
  const DeviceMesh mesh = split_mesh(s.config.model, env.world_size, pipeline);
  s.config.dist.tensor_parallel = mesh.tensor_parallel();  // the training run's layout does not apply
  s.config.dist.pipeline_parallel = mesh.pipeline_parallel();
  s.config.dist.pipeline_chunks = 1;
  s.config.dist.sharding = Sharding::None;
  PlanContext context;  // the ranks share this machine's cores: threads per rank as for training
  context.local_rank = env.local_rank;
  context.model_parallel = env.world_size;
  context.pipeline_parallel = mesh.pipeline_parallel();
  context.ranks_per_node = env.local_world_size;
  HardwareAwareOptimizer planner(s.config, context);
  s.plan = planner.plan();
  s.group = std::make_shared<ProcessGroup>(env, s.config.dist, rank_device(env, s.plan.device));
  const ModelConfig& cfg = s.config.model;
  s.model = GPT(cfg, cfg.vocab_size, AttentionKernel::Sdpa, std::make_shared<DeferredInit>());
  s.mesh.emplace(join_mesh(mesh, s.group, s.model, /*sequence_parallel=*/false, /*pipeline_chunks=*/1));
  torch::NoGradGuard no_grad;
  auto whole = s.model->named_parameters();  // every name; another stage's weights are empty here
  auto params = s.mesh->stage ? s.mesh->stage->module().named_parameters() : whole;
  std::set<std::string> filled;
  auto mine = [&](const std::string& name) {  // another stage's weights are not read
    if (!whole.find(name)) throw unknown_checkpoint_tensor(ckpt, name);
    return params.find(name) != nullptr;
  };
  for_each_weight(ckpt, mine, [&](const std::string& name, const torch::Tensor& value) {
    torch::Tensor* p = params.find(name);
    assign_parameter(*p, own_shard(s.model, ckpt, name, *p, value, s.mesh->tensor_comm.get()));
    filled.insert(name);
  });
  for (const auto& item : params) {
    if (!filled.count(item.key())) throw IoError("checkpoint " + ckpt.string() + " lacks the model's '" + item.key() + "'");
  }
  planner.apply_optimizations(s.model);
  s.model->eval();
  return s;
}

}  // namespace hwt::cli
