#include "hwtrain/train/sharded_checkpoint.h"

#include "hwtrain/train/blockwise_quant.h"

#include "hwtrain/io/mapped_safetensors.h"

#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/core/fault_injection.h"
#include "hwtrain/core/files.h"
#include "hwtrain/io/safetensors.h"
#include "hwtrain/train/sharded_checkpoint_reader.h"

namespace hwt {

namespace fs = std::filesystem;


std::string shard_file_name(int rank, int world_size) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "shard-%05d-of-%05d.safetensors", rank, world_size);
  return buf;
}

void write_checkpoint_shard(const fs::path& staging, int rank, int world_size, const NamedTensors& weights,
                            const NamedTensors& optimizer_state) {
  NamedTensors entries;
  for (const auto& [name, t] : weights) entries.emplace_back("model." + name, t.detach().to(torch::kCPU));
  for (const auto& [name, t] : optimizer_state) entries.emplace_back("optimizer." + name, t.detach().to(torch::kCPU));
  save_safetensors(staging / shard_file_name(rank, world_size), entries, {{"format", "hwtrain-shard"}});
  fault_point("shard");
}

void write_sharding_manifest(const fs::path& staging, int world_size, const ParameterShapes& shapes) {
  nlohmann::json j;
  j["world_size"] = world_size;
  j["shapes"] = nlohmann::json::object();
  for (const auto& [name, shape] : shapes) j["shapes"][name] = shape;
  write_file_atomic(staging / kShardingManifest, j.dump(1));
}

std::string checkpoint_model_format(const fs::path& dir) {
  if (fs::exists(dir / kShardingManifest)) return "hwtrain-gpt";
  const MappedSafetensors file(dir / "model.safetensors");  // the header only is read
  const auto it = file.metadata().find("format");
  return it == file.metadata().end() ? "hwtrain-gpt" : it->second;
}

void require_builtin_model_checkpoint(const fs::path& dir) {
  const std::string format = checkpoint_model_format(dir);
  if (format == "hwtrain-gpt") return;
  throw IoError("checkpoint " + dir.string() + " holds a library model (format '" + format +
                "', a user's TrainableModel trained by train_model or the Trainer), not one of hwtrain's own: "
                "load it with Trainer::resume_from and that model");
}

NamedTensors read_checkpoint_weights(const fs::path& dir) {
  if (!fs::exists(dir / kShardingManifest)) return load_safetensors(dir / "model.safetensors").tensors;
  ShardedCheckpointReader shards(dir);
  return read_sharded_weights(shards);
}

NamedTensors read_checkpoint_optimizer(const fs::path& dir) {
  NamedTensors state = load_safetensors(dir / "optimizer.safetensors").tensors;
  if (!fs::exists(dir / kShardingManifest)) return state;
  ShardedCheckpointReader shards(dir);
  for (auto& entry : read_sharded_optimizer_state(shards)) state.push_back(std::move(entry));
  return state;
}

NamedTensors read_sharded_optimizer_state(ShardedCheckpointReader& shards, const ParameterFilter& wanted,
                                          bool eight_bit_as_stored) {
  NamedTensors state;
  for (const auto& [name, shape] : shards.parameters()) {
    if (wanted && !wanted(name)) continue;
    const int64_t numel = c10::multiply_integers(shape);
    for (const std::string kind : {"exp_avg.", "exp_avg_sq.", "step."}) {
      const std::string key = "optimizer." + kind + name;
      // A one-process checkpoint's 8-bit moments as stored: the whole tensor's codes and scales,
      // which AdamW loads as they are (dequantized and quantized again they would not come back exactly).
      if (eight_bit_as_stored && kind != "step." && shards.whole_checkpoint() && numel > 0) {
        if (auto q = shards.eight_bit(key, 0, numel)) {
          state.emplace_back(eight_bit_codes_key(kind, name), std::move(q->first));
          state.emplace_back(eight_bit_scales_key(kind, name), std::move(q->second));
          continue;
        }
      }
      state.emplace_back(kind + name, shards.whole(key));
    }
  }
  return state;
}

NamedTensors read_sharded_weights(ShardedCheckpointReader& shards, const ParameterFilter& wanted) {
  NamedTensors whole;
  for (const auto& [name, shape] : shards.parameters()) {
    if (!wanted || wanted(name)) whole.emplace_back(name, shards.whole("model." + name));
  }
  return whole;
}

}  // namespace hwt
