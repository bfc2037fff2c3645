#include "hwtrain/cli/parallel_setup.h"

#include <csignal>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/dist/tensor_parallel_group.h"
#include "hwtrain/dist/zero1.h"
#include "hwtrain/obs/log.h"
#include "hwtrain/plan/stage_split.h"
#include "hwtrain/train/interrupt.h"
#include "hwtrain/train/pipeline_step.h"
#include "hwtrain/train/sharded_training.h"

namespace hwt::cli {

std::optional<DeviceMesh> run_mesh_shape(const RunConfig& config, int world_size) {
  if (!config.dist.tensor_parallel || !config.dist.pipeline_parallel || !config.dist.pipeline_chunks) return std::nullopt;
  DeviceMesh mesh(world_size, *config.dist.tensor_parallel, *config.dist.pipeline_parallel);
  check_mesh_fits_model(mesh, config.model, *config.dist.pipeline_chunks);
  return mesh;
}

PlanContext mesh_plan_context(const std::optional<DeviceMesh>& fixed, const DistEnv& env) {
  PlanContext context{fixed ? fixed->data_parallel() : env.world_size, env.local_rank};
  if (fixed) context.model_parallel = fixed->tensor_parallel() * fixed->pipeline_parallel();
  if (fixed) context.pipeline_parallel = fixed->pipeline_parallel();
  context.ranks_per_node = env.local_world_size;
  return context;
}

DeviceMesh planned_mesh_shape(const std::optional<DeviceMesh>& fixed, const RunConfig& config, const Plan& plan,
                              int world_size) {
  if (fixed) return *fixed;
  // Without a layout (one rank, or a setting that needs the whole model: the plan's line says which)
  // every rank is a replica, as the plan counted them; unless the user split the model.
  const int64_t want_tp = config.dist.tensor_parallel.value_or(1), want_pp = config.dist.pipeline_parallel.value_or(1);
  if (!plan.layout && (want_tp > 1 || want_pp > 1)) {
    std::string why = "no layout fits the memory";
    for (const Decision& d : plan.decisions) {
      if (d.name == "parallel_layout") why = d.reason;
    }
    std::vector<std::string> autos;  // what made the mesh the search's
    if (!config.dist.tensor_parallel) autos.push_back("dist.tensor_parallel");
    if (!config.dist.pipeline_parallel) autos.push_back("dist.pipeline_parallel");
    if (!config.dist.pipeline_chunks) autos.push_back("dist.pipeline_chunks");
    throw ConfigError((want_tp > 1 ? "dist.tensor_parallel = " + std::to_string(want_tp)
                                   : "dist.pipeline_parallel = " + std::to_string(want_pp)) +
                      " splits the model, but the layout search (" + join(autos) + " = auto) chose none: " + why +
                      "; set " + join(autos, " and ") + " (a fixed mesh), or leave the split to the search");
  }
  const int64_t tp = plan.layout ? plan.layout->tensor_parallel : 1;
  const int64_t pp = plan.layout ? plan.layout->pipeline_parallel : 1;
  DeviceMesh mesh(world_size, tp, pp);
  check_mesh_fits_model(mesh, config.model, planned_pipeline_chunks(config, plan));
  return mesh;
}

int64_t planned_pipeline_chunks(const RunConfig& config, const Plan& plan) {
  return config.dist.pipeline_chunks.value_or(plan.layout ? plan.layout->pipeline_chunks : 1);
}

void check_plan_for_mesh(const DeviceMesh& mesh, const Plan& plan, int64_t pipeline_chunks) {
  if (pipeline_chunks > 1 && mesh.pipeline_parallel() == 1) {
    throw ConfigError("dist.pipeline_chunks = " + std::to_string(pipeline_chunks) + " needs dist.pipeline_parallel > 1 "
                      "(the chunks interleave a pipeline's stages); set it 1 or set dist.pipeline_parallel");
  }
  if (pipeline_chunks > 1 && plan.grad_accum_steps % mesh.pipeline_parallel() != 0) {
    throw ConfigError("dist.pipeline_chunks = " + std::to_string(pipeline_chunks) + " interleaves micro-batches in groups "
                      "of dist.pipeline_parallel = " + std::to_string(mesh.pipeline_parallel()) + ": train.grad_accum_steps = " +
                      std::to_string(plan.grad_accum_steps) + " must be a multiple of it");
  }
  if (mesh.tensor_parallel() * mesh.pipeline_parallel() == 1) return;
  const std::string tp = mesh.tensor_parallel() > 1 ? "dist.tensor_parallel = " + std::to_string(mesh.tensor_parallel())
                                                    : "dist.pipeline_parallel = " + std::to_string(mesh.pipeline_parallel());
  if (plan.auto_batch_size) {
    throw ConfigError(tp + " cannot run with optimization.auto_batch_size = true (the probe's out-of-memory "
                      "retries are per rank; the ranks of a layer must run the same batches); set it false");
  }
  if (plan.optimizer_state_device == StateDevice::Host && plan.on_gpu()) {
    throw ConfigError(tp + " cannot run with optimization.optimizer_state_device = cpu on a GPU yet (the checkpoint "
                      "gathers host-resident moments over the tensor and pipeline groups, written for Gloo); set it to device");
  }
  if (plan.optimizer_in_backward()) {
    throw ConfigError(tp + " cannot run with optimization.optimizer_in_backward = true (the gradient norm spans "
                      "the ranks); set it false");
  }
}

void check_sharding_for_mesh(const DeviceMesh& mesh, const Plan& plan, const RunConfig& config) {
  const bool shards_gradients = plan.sharding == Sharding::Zero2 || plan.sharding == Sharding::Zero3;
  const int64_t tp = mesh.tensor_parallel(), vocab = config.model.vocab_size;
  if (!shards_gradients || tp == 1 || !config.dist.sequence_parallel || mesh.data_parallel() == 1 || vocab % tp == 0) return;
  throw ConfigError("dist.sharding = " + std::string(sharding_name(plan.sharding)) + " with dist.sequence_parallel = true " +
                    "needs the vocabulary (model.vocab_size = " + std::to_string(vocab) + ") to divide by " +
                    "dist.tensor_parallel = " + std::to_string(tp) + " (uneven embedding rows lay the norms' " +
                    "gradient shards out differently on the tensor ranks); set dist.sequence_parallel = false, " +
                    "dist.sharding = zero1, or a vocabulary that divides");
}

namespace {

// ZeRO-1: this rank's shard of the optimizer, the broadcast of updated shards, the gather for checkpoints.
// `group`: the data-parallel ranks (a model-parallel rank shards its own weights' moments over the
// ranks that hold the same weights).
OptimizerSharding zero1_sharding(Trainer& trainer, const std::shared_ptr<ProcessGroup>& group, double bucket_mb) {
  NamedTensors params = trainer.optimizer().named_parameters();
  auto ownership = std::make_shared<Zero1Ownership>(assign_zero1_owners(params, group->world_size()));
  log_info("{}", describe_zero1_memory(*ownership));
  OptimizerSharding s;
  s.owned = ownership->owned_by(group->rank());
  const auto bucket_bytes = static_cast<int64_t>(bucket_mb * 1024 * 1024);
  s.after_step = [params, ownership, group, bucket_bytes] {
    sync_parameters_after_step(params, *ownership, *group, bucket_bytes);
  };
  s.gather = [group](const NamedTensors& local) { return gather_optimizer_state(local, *group); };
  return s;
}


// This rank's stage: the blocks balanced over the stages, the pipeline group, and for a tied head the
// group of the first and last stages, which both hold the embedding.
std::shared_ptr<GptStage> make_stage(const DeviceMesh& mesh, const MeshCoordinates& at, ProcessGroup& world, GPT& model,
                                     int64_t chunks, std::shared_ptr<ProcessGroupComm>& stages) {
  const int rank = world.rank();
  const std::vector<int> line = mesh.pipeline_group(rank);
  stages = std::make_shared<ProcessGroupComm>(world.subgroup(line, "pipeline-" + std::to_string(line.front())));
  std::shared_ptr<TensorParallelComm> shared;
  if (model->config().tied_head() && (at.pipeline == 0 || at.pipeline == mesh.pipeline_parallel() - 1)) {
    const std::vector<int> ends{line.front(), line.back()};
    shared = std::make_shared<ProcessGroupComm>(world.subgroup(ends, "embedding-" + std::to_string(line.front())));
  }
  // Chunk c of stage s is virtual stage c p + s of the p x chunks the decoder is cut into.
  const int64_t p = mesh.pipeline_parallel();
  const std::vector<StageRange> cut = split_decoder(model->config(), model->vocab_size(), p * chunks);
  StagePlace place{at.pipeline, p, {}};
  std::string mine;
  for (int64_t c = 0; c < chunks; ++c) {
    const StageRange& r = cut[static_cast<size_t>(c * p + at.pipeline)];
    place.chunks.push_back({r.begin, r.end});
    mine += (mine.empty() ? "" : ", ") + std::to_string(r.begin) + "-" + std::to_string(r.end - 1);
  }
  log_info("pipeline: {} ({}; this stage: blocks {}, balanced with the LM head on the last)", describe_stages(cut),
           chunks > 1 ? std::to_string(chunks) + " interleaved chunks per stage" : std::string("one chunk per stage"), mine);
  return std::make_shared<GptStage>(model, std::move(place), stages, std::move(shared));
}

}  // namespace

RunMesh join_mesh(const DeviceMesh& mesh, const std::shared_ptr<ProcessGroup>& world, GPT& model,
                  bool sequence_parallel, int64_t pipeline_chunks) {
  RunMesh run{mesh, mesh.coordinates(world ? world->rank() : 0), nullptr, nullptr, nullptr, nullptr, nullptr};
  if (!world) return run;
  if (!run.model_parallel()) {
    run.data = world;
    return run;
  }
  const int rank = world->rank();
  // Each group is named by its first member, so that its members meet under one store prefix.
  const std::vector<int> tensor = mesh.tensor_group(rank), data = mesh.data_group(rank);
  if (mesh.tensor_parallel() > 1) {
    run.tensor = world->subgroup(tensor, "tensor-" + std::to_string(tensor.front()));
    run.tensor_comm = std::make_shared<ProcessGroupComm>(run.tensor);
    model->set_tensor_parallel(run.tensor_comm, sequence_parallel);
  }
  if (mesh.pipeline_parallel() > 1) run.stage = make_stage(mesh, run.at, *world, model, pipeline_chunks, run.pipeline_comm);
  if (mesh.data_parallel() > 1) run.data = world->subgroup(data, "data-" + std::to_string(data.front()));
  log_info("parallel layout: {}{}; this rank is tensor rank {} of data-parallel replica {}", mesh.describe(),
           run.tensor && sequence_parallel ? " (sequence parallel)" : "", run.at.tensor, run.at.data);
  return run;
}

DataParallelParts attach_data_parallel(Trainer& trainer, const std::shared_ptr<ProcessGroup>& group,
                                       const DistConfig& dist, const Plan& plan) {
  trainer.set_loss_reducer([group](double loss) { return group->mean_across_ranks(loss, "averaging the loss"); });
  DataParallelParts parts;
  if (plan.sharding == Sharding::Zero2 || plan.sharding == Sharding::Zero3) {
    const ShardStage stage = plan.sharding == Sharding::Zero2 ? ShardStage::Zero2 : ShardStage::Zero3;
    ShardedTraining sharded = shard_training(trainer.model(), trainer.optimizer(), group, stage, plan.precision,
                                             trainer.take_resumed_state(), plan.gradient_reduce);
    parts.sharded = sharded.engine;
    trainer.set_gradient_sync(sharded.engine);
    trainer.set_optimizer_sharding(std::move(sharded.sharding));
    return parts;
  }
  DataParallelOptions ddp;
  ddp.bucket_size_mb = dist.bucket_size_mb;
  parts.ddp = std::make_shared<DataParallel>(group, trainer.model().module().parameters(), ddp);
  trainer.set_gradient_sync(parts.ddp);
  if (plan.sharding == Sharding::Zero1) trainer.set_optimizer_sharding(zero1_sharding(trainer, group, dist.bucket_size_mb));
  return parts;
}

int run_exit_status(const TrainResult& result, int64_t max_steps, ProcessGroup* group) {
  if (result.steps >= max_steps) return 0;  // every rank has the same steps: all return here, or none
  const int own = result.stop_reason.rfind("interrupted by ", 0) == 0 ? interrupt_signal() : 0;
  int sig = own;
  if (group) {  // the same calls on every rank: the first agreed signal ends them everywhere
    sig = 0;
    for (const int s : {SIGINT, SIGTERM}) {
      if (group->any_rank(own == s, "agreeing on the exit status")) {
        sig = s;
        break;
      }
    }
  }
  if (sig == 0) return 0;
  log_warn("{} at step {} of {}: exit status {}", result.stop_reason, result.steps, max_steps, 128 + sig);
  return 128 + sig;
}

void log_model_parallel_traffic(const RunMesh& mesh, double run_seconds) {
  auto line = [&](const char* what, const ProcessGroupComm* comm) {
    if (!comm) return;
    const ProcessGroupComm::Stats& s = comm->stats();
    const std::string started = s.started > 0 ? " (" + std::to_string(s.started) + " started ahead of compute)" : "";
    log_info("{}: {} collectives{} and {} sends ({:.1f} MiB); {:.2f} s blocked in them ({:.0f}% of the {:.0f} s run)",
             what, s.collectives, started, s.sends, static_cast<double>(s.bytes) / (1 << 20), s.seconds,
             run_seconds > 0 ? 100.0 * s.seconds / run_seconds : 0.0, run_seconds);
  };
  line("tensor parallel", mesh.tensor_comm.get());
  line("pipeline parallel", mesh.pipeline_comm.get());
}

}  // namespace hwt::cli
