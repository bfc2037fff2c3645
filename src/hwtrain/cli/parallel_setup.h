// The parallel layout of a `hwtrain train` run: the (data x pipeline x tensor) mesh from
// dist.tensor_parallel and dist.pipeline_parallel or the plan's layout (dist/device_mesh.h), checked against the model
// and the plan, and the process groups it needs: the tensor-parallel group the model's layers talk
// over, and the data-parallel group the gradients are averaged over (the world group itself when
// there is no model parallelism, so that plain data-parallel runs are what they were).
#pragma once
#include <memory>
#include <optional>

#include "hwtrain/dist/ddp.h"
#include "hwtrain/dist/device_mesh.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/dist/sharded_parameters.h"
#include "hwtrain/dist/tensor_parallel_group.h"
#include "hwtrain/model/gpt.h"
#include "hwtrain/model/gpt_stage.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/plan/planner.h"
#include "hwtrain/run/hardware_aware_optimizer.h"
#include "hwtrain/run/run_config.h"
#include "hwtrain/train/trainer.h"

namespace hwt::cli {

struct RunMesh {
  DeviceMesh mesh;
  MeshCoordinates at;                      // this rank's place in it
  std::shared_ptr<ProcessGroup> data;      // the data-parallel group (null: one replica)
  std::shared_ptr<ProcessGroup> tensor;    // the tensor-parallel group (null: no tensor parallelism)
  std::shared_ptr<GptStage> stage;         // this rank's pipeline stage (null: no pipeline parallelism)
  std::shared_ptr<ProcessGroupComm> tensor_comm, pipeline_comm;  // the model's view of those groups

  bool model_parallel() const { return mesh.tensor_parallel() * mesh.pipeline_parallel() > 1; }
  int data_rank() const { return at.data; }
  int data_size() const { return mesh.data_parallel(); }
};

// The mesh alone, before any group exists (it decides the planner's data-parallel world size), or
// empty when dist.tensor_parallel or dist.pipeline_parallel is "auto": the plan chooses it then.
// ConfigError for a mesh that does not divide the world size or cannot cut the model (into
// dist.pipeline_parallel x dist.pipeline_chunks chunks of at least one block).
std::optional<DeviceMesh> run_mesh_shape(const RunConfig& config, int world_size);

// What the planner is told of the mesh: a fixed one's data-parallel ranks and ranks per replica;
// under "auto" the whole world, for its layout search (plan/layout_decision.cpp) to cut.
PlanContext mesh_plan_context(const std::optional<DeviceMesh>& fixed, const DistEnv& env);

// The mesh of a run: the fixed one, or under "auto" the plan's layout (tensor x pipeline; one
// replica per rank when the plan has none), checked against the model like a fixed one.
DeviceMesh planned_mesh_shape(const std::optional<DeviceMesh>& fixed, const RunConfig& config, const Plan& plan,
                              int world_size);
// dist.pipeline_chunks, or under auto the plan's layout's (1 without one).
int64_t planned_pipeline_chunks(const RunConfig& config, const Plan& plan);

// What model parallelism cannot run with, refused with the key named: ZeRO-3 of a pipeline stage
// (ZeRO-1/2 shard a rank's weights' state over the data-parallel ranks), the batch-size probe (its OOM retries
// are per rank), the optimizer in backward, 8-bit moments, and on a GPU offloaded ones; and pipeline
// chunks without a pipeline, or with micro-batches that are not a multiple of its stages.
void check_plan_for_mesh(const DeviceMesh& mesh, const Plan& plan, int64_t pipeline_chunks);
// ZeRO-2/3 over the replicas of a tensor-parallel model sums the sequence-parallel norms' gradient
// shards over the tensor group, which needs every tensor rank's units of one shape: a vocabulary
// that divides by the tensor-parallel size (else ConfigError naming the keys).
void check_sharding_for_mesh(const DeviceMesh& mesh, const Plan& plan, const RunConfig& config);

// The groups this rank belongs to (collective: every rank calls it), the model's layers cut to this
// rank's tensor-parallel shard when the mesh has one, and this rank's pipeline stage when it has
// stages (the blocks cut by plan/stage_split.h into pipeline_chunks chunks per stage).
RunMesh join_mesh(const DeviceMesh& mesh, const std::shared_ptr<ProcessGroup>& world, GPT& model,
                  bool sequence_parallel, int64_t pipeline_chunks);

// Data parallelism for the trainer over `group` (the data-parallel ranks): the loss averaged over
// them, and the gradient sync of the planned sharding: bucketed all-reduce (none, zero1 with
// its sharded moments) or reduce-scattered shards (zero2, zero3: train/sharded_training.h).
struct DataParallelParts {
  std::shared_ptr<DataParallel> ddp;            // none and zero1: bucketed all-reduce
  std::shared_ptr<ShardedParameters> sharded;   // zero2 and zero3
};
DataParallelParts attach_data_parallel(Trainer& trainer, const std::shared_ptr<ProcessGroup>& group,
                                       const DistConfig& dist, const Plan& plan);

// The train command's exit status: 128 + the signal that cut `result` short of `max_steps` on any
// rank of `group` (SIGINT before SIGTERM; collective, null: this process alone), said in a warning, so
// that scripts, schedulers and sweeps do not take it for a finished run; 0 for a run that had done
// its steps or stopped for another reason. A rank stopped only by another's signal gets it too.
int run_exit_status(const TrainResult& result, int64_t max_steps, ProcessGroup* group);

// "tensor parallel: 1204 collectives (18.4 MiB), 0.84 s blocked (7% of the 12 s run)", a line per group.
void log_model_parallel_traffic(const RunMesh& mesh, double run_seconds);

}  // namespace hwt::cli
