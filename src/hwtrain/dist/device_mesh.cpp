#include "hwtrain/dist/device_mesh.h"

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/model/tensor_parallel.h"

namespace hwt {
DeviceMesh::DeviceMesh(int world_size, int64_t tensor_parallel, int64_t pipeline_parallel) {
  if (tensor_parallel < 1 || pipeline_parallel < 1) {
    throw ConfigError("dist.tensor_parallel = " + std::to_string(tensor_parallel) + " and dist.pipeline_parallel = " +
                      std::to_string(pipeline_parallel) + " must be at least 1");
  }
  const int64_t model_ranks = tensor_parallel * pipeline_parallel;
  if (world_size % model_ranks != 0) {
    throw ConfigError("dist.tensor_parallel = " + std::to_string(tensor_parallel) + " x dist.pipeline_parallel = " +
                      std::to_string(pipeline_parallel) + " = " + std::to_string(model_ranks) +
                      " does not divide the world size " + std::to_string(world_size) +
                      "; their product must be one of " + divisors_text(world_size));
  }
  tensor_ = static_cast<int>(tensor_parallel);
  pipeline_ = static_cast<int>(pipeline_parallel);
  data_ = static_cast<int>(world_size / model_ranks);
}

MeshCoordinates DeviceMesh::coordinates(int rank) const {
  MeshCoordinates c;
  c.tensor = rank % tensor_;
  c.pipeline = (rank / tensor_) % pipeline_;
  c.data = rank / (tensor_ * pipeline_);
  return c;
}

int DeviceMesh::rank_of(const MeshCoordinates& c) const { return (c.data * pipeline_ + c.pipeline) * tensor_ + c.tensor; }

std::vector<int> DeviceMesh::tensor_group(int rank) const {
  MeshCoordinates c = coordinates(rank);
  std::vector<int> out;
  for (c.tensor = 0; c.tensor < tensor_; ++c.tensor) out.push_back(rank_of(c));
  return out;
}

std::vector<int> DeviceMesh::pipeline_group(int rank) const {
  MeshCoordinates c = coordinates(rank);
  std::vector<int> out;
  for (c.pipeline = 0; c.pipeline < pipeline_; ++c.pipeline) out.push_back(rank_of(c));
  return out;
}

std::vector<int> DeviceMesh::data_group(int rank) const {
  MeshCoordinates c = coordinates(rank);
  std::vector<int> out;
  for (c.data = 0; c.data < data_; ++c.data) out.push_back(rank_of(c));
  return out;
}

std::string DeviceMesh::describe() const {
  return std::to_string(data_) + " data x " + std::to_string(pipeline_) + " pipeline x " + std::to_string(tensor_) +
         " tensor";
}

void check_mesh_fits_model(const DeviceMesh& mesh, const ModelConfig& model, int64_t pipeline_chunks) {
  check_tensor_parallel_fits(model, mesh.tensor_parallel());
  const int64_t p = mesh.pipeline_parallel();
  if (p > model.n_layer) {
    throw ConfigError("dist.pipeline_parallel = " + std::to_string(p) + " is more stages than model.n_layer = " +
                      std::to_string(model.n_layer) + " blocks; valid: 1 to " + std::to_string(model.n_layer));
  }
  if (p * pipeline_chunks > model.n_layer) {
    throw ConfigError("dist.pipeline_parallel = " + std::to_string(p) + " x dist.pipeline_chunks = " +
                      std::to_string(pipeline_chunks) + " = " + std::to_string(p * pipeline_chunks) +
                      " model chunks is more than model.n_layer = " + std::to_string(model.n_layer) +
                      " blocks; valid: pipeline_chunks 1 to " + std::to_string(model.n_layer / p));
  }
}

}  // namespace hwt
