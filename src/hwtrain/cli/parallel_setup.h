// The parallel layout of a `hwtrain train` run: the (data x pipeline x tensor) mesh from
// dist.tensor_parallel and dist.pipeline_parallel (dist/device_mesh.h), checked against the model
// and the plan, and the process groups it needs: the tensor-parallel group the model's layers talk
// over, and the data-parallel group the gradients are averaged over (the world group itself when
// there is no model parallelism, so that plain data-parallel runs are what they were).
#pragma once
#include <memory>

#include "hwtrain/dist/device_mesh.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/model/gpt.h"
#include "hwtrain/plan/plan.h"
#include "hwtrain/run/run_config.h"

namespace hwt::cli {

struct RunMesh {
  DeviceMesh mesh;
  MeshCoordinates at;                      // this rank's place in it
  std::shared_ptr<ProcessGroup> data;      // the data-parallel group (null: one replica)
  std::shared_ptr<ProcessGroup> tensor;    // the tensor-parallel group (null: no tensor parallelism)

  bool model_parallel() const { return mesh.tensor_parallel() * mesh.pipeline_parallel() > 1; }
  int data_rank() const { return at.data; }
  int data_size() const { return mesh.data_parallel(); }
};

// The mesh alone, before any group exists (it decides the planner's data-parallel world size).
// ConfigError for a mesh that does not divide the world size or cut the model, and for pipeline
// parallelism, which `train` does not run yet.
DeviceMesh run_mesh_shape(const RunConfig& config, int world_size);

// What tensor parallelism cannot run with, refused with the key named: sharding (ZeRO) of the
// model's shards, the batch-size probe (its OOM retries are per rank), the optimizer in backward.
void check_plan_for_mesh(const DeviceMesh& mesh, const Plan& plan);

// The groups this rank belongs to (collective: every rank calls it), and the model's layers cut to
// this rank's tensor-parallel shard when the mesh has one.
RunMesh join_mesh(const DeviceMesh& mesh, const std::shared_ptr<ProcessGroup>& world, GPT& model);

}  // namespace hwt::cli
