// The contents of a training checkpoint directory:
//   model.safetensors      weights (names as GPT's named_parameters), or in a ZeRO-2/3 run
//                          sharding.json and one shard file per rank (train/sharded_checkpoint.h)
//   optimizer.safetensors  AdamW moments and step counts, GradScaler state, RNG state
//   trainer_state.json     step, tokens seen, elapsed time, data loader position (seed, epoch, position), LR scale, batch
//                          geometry, dataset identity (tokenizer, vocabulary, fingerprint)
//   config.toml, plan.json the resolved config and the plan the run used
//   tokenizer.json (+ tokenizer.model)  the tokenizer the run was trained with (data/tokenizer_files.h)
// Writing goes through CheckpointStore (staging directory, fsync, rename).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/train/callback.h"

namespace hwt {

class ShardedCheckpointReader;  // train/sharded_checkpoint_reader.h

struct TrainingCheckpoint {
  NamedTensors model;       // whole weights; empty when the ranks write shards
  std::string model_format = "hwtrain-gpt";  // the weights file's format tag (TrainableModel::checkpoint_format)
  int shard_world_size = 0; // > 0: sharding.json with shard_shapes replaces model.safetensors
  std::vector<std::pair<std::string, std::vector<int64_t>>> shard_shapes;
  NamedTensors optimizer;  // includes "scaler.*" and "rng.*" entries
  nlohmann::json state;
  std::string config_toml;
  std::string plan_json;
  // A checkpoint as read_training_checkpoint gives it: the weights and AdamW moments stay in their
  // files (a sharded one's shard files, or a one-process one's model.safetensors and
  // optimizer.safetensors with fp32 moments; `model` is empty, `optimizer` holds the other entries)
  // and are read through this, whole or only this rank's part (Trainer::resume_from).
  std::shared_ptr<ShardedCheckpointReader> shards;
};

// What a resumed ZeRO-2/3 run hands its shards (Trainer::take_resumed_state, shard_training): the
// whole optimizer state of a checkpoint written whole, or the shard files of a sharded one, from
// which each rank reads its own segments of the weights and of the AdamW state.
struct ResumedState {
  NamedTensors optimizer;
  std::shared_ptr<ShardedCheckpointReader> shards;
  bool empty() const { return optimizer.empty() && !shards; }
};

// Writes the files into `dir` (a staging directory).
void write_training_checkpoint(const std::filesystem::path& dir, const TrainingCheckpoint& ckpt);
// Verifies a checkpoint directory against its COMPLETE marker (verify_checkpoint: sizes and
// CRC32C of every file; a shard file's CRC32C when its data is first read), reads it and
// range-checks trainer_state.json (trainer_state_file.h); throws IoError naming the file at fault.
TrainingCheckpoint read_training_checkpoint(const std::filesystem::path& dir);
// Reads just the resolved config of a checkpoint (for --resume and generate/eval), after checking
// config.toml against the marker.
std::string read_checkpoint_config(const std::filesystem::path& dir);

}  // namespace hwt
