// DeviceMesh: Megatron's rank order (tensor fastest, so a tensor group is consecutive ranks on one
// node), the groups of each rank, and one-line errors naming the key and the valid values for a
// mesh that does not divide the world size or cannot cut the model.
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/dist/device_mesh.h"
#include "support/error_of.h"

namespace hwt {
namespace {

std::string error_of(const std::function<void()>& f) { return testing::error_of<ConfigError>(f); }

TEST(DeviceMesh, RanksAreTensorFastestThenPipelineThenData) {
  const DeviceMesh mesh(16, /*tensor_parallel=*/2, /*pipeline_parallel=*/4);
  EXPECT_EQ(mesh.data_parallel(), 2);
  EXPECT_EQ(mesh.describe(), "2 data x 4 pipeline x 2 tensor");
  for (int rank = 0; rank < 16; ++rank) EXPECT_EQ(mesh.rank_of(mesh.coordinates(rank)), rank);
  const MeshCoordinates c = mesh.coordinates(11);  // 11 = (1 * 4 + 1) * 2 + 1
  EXPECT_EQ(c.data, 1);
  EXPECT_EQ(c.pipeline, 1);
  EXPECT_EQ(c.tensor, 1);
  EXPECT_EQ(mesh.tensor_group(11), (std::vector<int>{10, 11}));
  EXPECT_EQ(mesh.pipeline_group(11), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(mesh.data_group(11), (std::vector<int>{3, 11}));
}

TEST(DeviceMesh, EveryRankIsInExactlyOneGroupOfEachKind) {
  const DeviceMesh mesh(24, 2, 3);
  for (auto group_of : {&DeviceMesh::tensor_group, &DeviceMesh::pipeline_group, &DeviceMesh::data_group}) {
    std::vector<int> seen(24, 0);
    for (int rank = 0; rank < 24; ++rank) {
      const std::vector<int> members = (mesh.*group_of)(rank);
      EXPECT_NE(std::find(members.begin(), members.end(), rank), members.end());
      if (members.front() == rank) {
        for (int m : members) ++seen[static_cast<size_t>(m)];
      }
    }
    for (int n : seen) EXPECT_EQ(n, 1);
  }
}

TEST(DeviceMesh, AMeshThatDoesNotDivideTheWorldIsRefusedWithTheValidProducts) {
  const std::string e = error_of([] { DeviceMesh(6, 4, 1); });
  EXPECT_NE(e.find("dist.tensor_parallel = 4"), std::string::npos) << e;
  EXPECT_NE(e.find("world size 6"), std::string::npos) << e;
  EXPECT_NE(e.find("1, 2, 3, 6"), std::string::npos) << e;
  EXPECT_NE(error_of([] { DeviceMesh(4, 0, 1); }).find("must be at least 1"), std::string::npos);
}

TEST(DeviceMesh, AModelTheMeshCannotCutIsRefusedNamingTheKey) {
  ModelConfig model;
  model.preset = "";
  model.n_layer = 2;
  model.n_head = 6;
  model.n_embd = 48;
  std::string e = error_of([&] { check_mesh_fits_model(DeviceMesh(4, 4, 1), model); });
  EXPECT_NE(e.find("model.n_head = 6"), std::string::npos) << e;
  EXPECT_NE(e.find("valid: 1, 2, 3, 6"), std::string::npos) << e;
  e = error_of([&] { check_mesh_fits_model(DeviceMesh(4, 1, 4), model); });
  EXPECT_NE(e.find("dist.pipeline_parallel = 4"), std::string::npos) << e;
  EXPECT_NE(e.find("model.n_layer = 2"), std::string::npos) << e;
  model.architecture = Architecture::kLlama;
  model.n_kv_head = 3;
  e = error_of([&] { check_mesh_fits_model(DeviceMesh(2, 2, 1), model); });
  EXPECT_NE(e.find("model.n_kv_head = 3"), std::string::npos) << e;
  model.n_kv_head = 2;
  model.n_head = 4;
  model.n_embd = 64;
  EXPECT_NO_THROW(check_mesh_fits_model(DeviceMesh(4, 2, 2), model));
}

}  // namespace
}  // namespace hwt
