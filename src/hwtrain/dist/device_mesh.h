// DeviceMesh: the (data x pipeline x tensor) layout of a run's ranks, from dist.tensor_parallel and
// dist.pipeline_parallel or the planner's layout (data parallel is the rest of the world size).
// Ranks are numbered with the tensor coordinate fastest, then the pipeline stage, then the
// data-parallel replica (Megatron-LM's order): a tensor-parallel group is a run of consecutive ranks, so it stays on one node whenever its
// size divides the ranks per node. check_mesh_fits_model refuses a mesh the model cannot be cut by.
// Pure arithmetic: the process groups themselves come from ProcessGroup::subgroup.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/dist/dist_config.h"
#include "hwtrain/model/model_config.h"

namespace hwt {

struct MeshCoordinates {
  int data = 0, pipeline = 0, tensor = 0;
};

class DeviceMesh {
 public:
  // Throws ConfigError naming dist.tensor_parallel / dist.pipeline_parallel when their product does
  // not divide the world size, with the values that would.
  DeviceMesh(int world_size, int64_t tensor_parallel, int64_t pipeline_parallel);

  int world_size() const { return data_ * pipeline_ * tensor_; }
  int data_parallel() const { return data_; }
  int pipeline_parallel() const { return pipeline_; }
  int tensor_parallel() const { return tensor_; }

  MeshCoordinates coordinates(int rank) const;
  int rank_of(const MeshCoordinates& c) const;
  // The ranks (ascending) that share `rank`'s other two coordinates: its tensor-parallel group,
  // its pipeline (the stages of its replica and tensor slice) and its data-parallel group.
  std::vector<int> tensor_group(int rank) const;
  std::vector<int> pipeline_group(int rank) const;
  std::vector<int> data_group(int rank) const;
  // "2 data x 1 pipeline x 2 tensor"
  std::string describe() const;

 private:
  int data_, pipeline_, tensor_;
};

// ConfigError, one line naming the key and the valid values, when the model cannot be cut by the
// mesh: tensor parallel must divide the heads, key/value heads and MLP width
// (check_tensor_parallel_fits), pipeline parallel may not exceed model.n_layer.
// pipeline_chunks: model chunks per stage (interleaved 1F1B); every one of the p x chunks holds a block.
void check_mesh_fits_model(const DeviceMesh& mesh, const ModelConfig& model, int64_t pipeline_chunks = 1);

}  // namespace hwt
