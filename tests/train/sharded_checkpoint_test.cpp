// Sharded checkpoint files read back as untrusted input: two ranks' shards of a (2 x 3) and a (4)
// tensor join into the whole tensors; a missing shard, a non-segment entry, a tensor sharding.json
// names but no shard holds, and malformed manifests (a float dimension, a world size out of range,
// shapes that are not lists) are IoErrors naming what is wrong.
#include <gtest/gtest.h>

#include <map>

#include "hwtrain/core/error.h"
#include "hwtrain/io/safetensors.h"
#include "hwtrain/train/sharded_checkpoint.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

const torch::Tensor kW = torch::arange(6, torch::kFloat).view({2, 3}), kB = torch::arange(4, torch::kFloat);

// Rank 0 holds w[0:4], rank 1 w[4:6] and b; each with its AdamW segments.
void write_two_shards(const std::filesystem::path& dir) {
  auto state = [](const std::string& seg, int64_t n) {
    return NamedTensors{{"exp_avg." + seg, torch::ones({n})}, {"exp_avg_sq." + seg, torch::full({n}, 2.0f)},
                        {"step." + seg, torch::full({}, 5.0f)}};
  };
  NamedTensors s0 = state("w@0", 4), s1 = state("w@4", 2);
  for (auto& e : state("b@0", 4)) s1.push_back(e);
  write_checkpoint_shard(dir, 0, 2, {{"w@0", kW.reshape(-1).narrow(0, 0, 4)}}, s0);
  write_checkpoint_shard(dir, 1, 2, {{"w@4", kW.reshape(-1).narrow(0, 4, 2)}, {"b@0", kB}}, s1);
  write_sharding_manifest(dir, 2, {{"w", {2, 3}}, {"b", {4}}});
  save_safetensors(dir / "optimizer.safetensors", {{"rng.cpu", torch::zeros({3}, torch::kUInt8)}});
}

TEST(ShardedCheckpoint, ShardsJoinIntoTheWholeTensors) {
  testing::TempDir dir;
  write_two_shards(dir.path());
  std::map<std::string, torch::Tensor> w;
  for (auto& [name, t] : read_checkpoint_weights(dir.path())) w[name] = t;
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(torch::equal(w["w"], kW));
  EXPECT_TRUE(torch::equal(w["b"], kB));
  std::map<std::string, torch::Tensor> o;
  for (auto& [name, t] : read_checkpoint_optimizer(dir.path())) o[name] = t;
  EXPECT_EQ(o.size(), 1u + 3 * 2);  // rng, and exp_avg / exp_avg_sq / step of w and b
  EXPECT_TRUE(torch::equal(o["exp_avg_sq.w"], torch::full({2, 3}, 2.0f)));
  EXPECT_EQ(o["step.b"].item<float>(), 5.0f);
}

TEST(ShardedCheckpoint, DamagedShardsAreNamed) {
  testing::TempDir dir;
  write_two_shards(dir.path());
  const auto shard1 = dir.path() / shard_file_name(1, 2);
  std::filesystem::rename(shard1, dir.path() / "aside");
  EXPECT_NE(testing::error_of<IoError>([&] { read_checkpoint_weights(dir.path()); }).find(shard_file_name(1, 2)),
            std::string::npos);
  std::filesystem::rename(dir.path() / "aside", shard1);

  write_checkpoint_shard(dir.path(), 1, 2, {{"w@4", torch::zeros({2})}, {"b", kB}}, {});  // "b" is no segment
  EXPECT_NE(testing::error_of<IoError>([&] { read_checkpoint_weights(dir.path()); }).find("is not a segment"),
            std::string::npos);
  write_checkpoint_shard(dir.path(), 1, 2, {{"w@4", torch::zeros({2})}}, {});  // b in no shard
  EXPECT_NE(testing::error_of<IoError>([&] { read_checkpoint_weights(dir.path()); }).find("first missing: 'b'"),
            std::string::npos);
}

TEST(ShardedCheckpoint, MalformedManifestsAreRefused) {
  testing::TempDir dir;
  write_two_shards(dir.path());
  const std::pair<const char*, const char*> cases[] = {
      {R"({"world_size": 2, "shapes": {"w": [2, 3.5]}})", "a dimension of 'w' is 3.5"},
      {R"({"world_size": 2, "shapes": {"w": [4.3e45]}})", "expected an integer"},
      {R"({"world_size": 0, "shapes": {}})", "world_size is 0"},
      {R"({"world_size": 99999999999, "shapes": {}})", "world_size"},
      {R"({"world_size": 2, "shapes": {"w": 6}})", "not a list"},
      {R"({"world_size": 2, "shapes": [[2, 3]]})", "not an object"},
      {R"({"world_size": 2, "shapes": {"w": [1099511627776, 2]}})", "over 2^40 elements"},
      {R"(not json)", "sharding.json is malformed"}};
  for (const auto& [text, expected] : cases) {
    std::ofstream(dir.path() / kShardingManifest, std::ios::trunc) << text;
    const std::string what = testing::error_of<IoError>([&] { read_checkpoint_weights(dir.path()); });
    EXPECT_NE(what.find(expected), std::string::npos) << text << " -> " << what;
  }
}

}  // namespace
}  // namespace hwt
