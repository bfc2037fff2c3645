#include "hwtrain/train/training_checkpoint.h"

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/io/safetensors.h"
#include "hwtrain/train/sharded_checkpoint.h"
#include "hwtrain/train/sharded_checkpoint_reader.h"
#include "hwtrain/train/trainer_state_file.h"

namespace hwt {

namespace fs = std::filesystem;

void write_training_checkpoint(const fs::path& dir, const TrainingCheckpoint& ckpt) {
  if (ckpt.shard_world_size > 0) {
    write_sharding_manifest(dir, ckpt.shard_world_size, ckpt.shard_shapes);
  } else {
    save_safetensors(dir / "model.safetensors", ckpt.model, {{"format", ckpt.model_format}});
  }
  save_safetensors(dir / "optimizer.safetensors", ckpt.optimizer);
  write_file_atomic(dir / "trainer_state.json", ckpt.state.dump(2));
  write_file_atomic(dir / "config.toml", ckpt.config_toml);
  write_file_atomic(dir / "plan.json", ckpt.plan_json);
}

namespace {
// Limits for the small text files of a checkpoint; the checksums have already bounded them.
constexpr uint64_t kMaxTextBytes = 64u << 20;
}  // namespace

std::string read_checkpoint_config(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / "config.toml", ec)) {
    throw IoError(dir.string() + " is not a hwtrain checkpoint: config.toml is missing");
  }
  verify_checkpoint_file(dir, "config.toml");
  return read_regular_file(dir / "config.toml", kMaxTextBytes);
}

TrainingCheckpoint read_training_checkpoint(const fs::path& dir) {
  TrainingCheckpoint ckpt;
  if (fs::exists(dir / kShardingManifest)) {  // each rank reads (and checks) only the shard files it needs
    verify_checkpoint(dir, [](const std::string& file) { return file.rfind("shard-", 0) == 0; });
    ckpt.shards = std::make_shared<ShardedCheckpointReader>(dir, /*verify_on_read=*/true);
    ckpt.optimizer = load_safetensors(dir / "optimizer.safetensors").tensors;
  } else {
    // The same check as eval and generate (the marker, every file's size and the others' CRC32C);
    // the tensor files' CRC32C when first read.
    verify_checkpoint(dir, [](const std::string& file) { return file == "model.safetensors" || file == "optimizer.safetensors"; });
    if (auto whole = ShardedCheckpointReader::open_whole(dir, /*verify_on_read=*/true)) {
      ckpt.shards = whole;  // the weights and moments stay in their files: a ZeRO-2/3 rank keeps its own ranges only
      ckpt.optimizer = whole->other_entries();
    } else {
      verify_checkpoint_file(dir, "model.safetensors");
      verify_checkpoint_file(dir, "optimizer.safetensors");
      ckpt.model = read_checkpoint_weights(dir);
      ckpt.optimizer = read_checkpoint_optimizer(dir);
    }
  }
  ckpt.config_toml = read_checkpoint_config(dir);
  ckpt.model_format = checkpoint_model_format(dir);
  const fs::path state_path = dir / "trainer_state.json";
  try {
    ckpt.state = parse_json_bounded(read_regular_file(state_path, kMaxTextBytes));
  } catch (const nlohmann::json::exception& e) {
    throw IoError(state_path.string() + " is corrupt: " + e.what());
  }
  parse_trainer_state(ckpt.state, state_path);  // range errors now, before a resume starts any work
  if (fs::exists(dir / "plan.json")) ckpt.plan_json = read_regular_file(dir / "plan.json", kMaxTextBytes);
  return ckpt;
}

}  // namespace hwt
