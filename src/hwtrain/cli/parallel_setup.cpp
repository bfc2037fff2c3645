#include "hwtrain/cli/parallel_setup.h"

#include "hwtrain/core/error.h"
#include "hwtrain/dist/tensor_parallel_group.h"
#include "hwtrain/obs/log.h"

namespace hwt::cli {

DeviceMesh run_mesh_shape(const RunConfig& config, int world_size) {
  DeviceMesh mesh = DeviceMesh::from_config(config.dist, world_size);
  check_mesh_fits_model(mesh, config.model);
  if (mesh.pipeline_parallel() > 1) {
    throw ConfigError("dist.pipeline_parallel = " + std::to_string(mesh.pipeline_parallel()) +
                      ": pipeline-parallel training is not implemented yet; valid: 1 (use dist.tensor_parallel "
                      "and data parallelism)");
  }
  return mesh;
}

void check_plan_for_mesh(const DeviceMesh& mesh, const Plan& plan) {
  if (mesh.tensor_parallel() == 1) return;
  const std::string tp = "dist.tensor_parallel = " + std::to_string(mesh.tensor_parallel());
  if (plan.sharding != Sharding::None) {
    throw ConfigError(tp + " cannot run with dist.sharding = " + std::string(sharding_name(plan.sharding)) +
                      " yet (ZeRO over the tensor-parallel shards is not implemented); set dist.sharding = none");
  }
  if (plan.auto_batch_size) {
    throw ConfigError(tp + " cannot run with optimization.auto_batch_size = true (the probe's out-of-memory "
                      "retries are per rank; the ranks of a layer must run the same batches); set it false");
  }
  if (plan.optimizer_state_dtype == StateDtype::Int8) {
    throw ConfigError(tp + " cannot run with optimization.optimizer_state_dtype = int8 yet (its block-wise codes "
                      "are not cut by the tensor-parallel layout); set it fp32");
  }
  if (plan.optimizer_in_backward()) {
    throw ConfigError(tp + " cannot run with optimization.optimizer_in_backward = true (the gradient norm spans "
                      "the ranks); set it false");
  }
}

RunMesh join_mesh(const DeviceMesh& mesh, const std::shared_ptr<ProcessGroup>& world, GPT& model) {
  RunMesh run{mesh, mesh.coordinates(world ? world->rank() : 0), nullptr, nullptr};
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
    model->set_tensor_parallel(std::make_shared<ProcessGroupComm>(run.tensor));
  }
  if (mesh.data_parallel() > 1) run.data = world->subgroup(data, "data-" + std::to_string(data.front()));
  log_info("parallel layout: {}; this rank is tensor rank {} of data-parallel replica {}", mesh.describe(),
           run.at.tensor, run.at.data);
  return run;
}

}  // namespace hwt::cli
