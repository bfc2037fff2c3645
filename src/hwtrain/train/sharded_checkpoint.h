// Sharded checkpoints (ZeRO-2/3, as PyTorch's DCP writes them): every rank writes its own shard file
// into the checkpoint's staging directory (which therefore must be on a file system all ranks
// share), and rank 0 writes sharding.json (the world size and every parameter's whole shape) in
// place of model.safetensors, beside the files every checkpoint has (training_checkpoint.h); the
// COMPLETE marker then covers the shards' sizes and checksums. A shard file holds the rank's fp32
// master segments as "model.<param>@<offset>" and its AdamW state segments as "optimizer.<entry>".
// Reading goes through ShardedCheckpointReader (train/sharded_checkpoint_reader.h): whole tensors
// for eval, generate, export and an unsharded resume, or (a ZeRO-2/3 resume) just this rank's
// segments, so a sharded checkpoint resumes on any world size and with any sharding.
#pragma once
#include <functional>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "hwtrain/train/callback.h"

namespace hwt {

inline constexpr const char* kShardingManifest = "sharding.json";

using ParameterShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

std::string shard_file_name(int rank, int world_size);  // "shard-00001-of-00004.safetensors"

void write_checkpoint_shard(const std::filesystem::path& staging, int rank, int world_size, const NamedTensors& weights,
                            const NamedTensors& optimizer_state);
void write_sharding_manifest(const std::filesystem::path& staging, int world_size, const ParameterShapes& shapes);

// The whole weights of a checkpoint (model.safetensors, or joined from the shards). IoError names
// the file at fault: a missing or malformed shard or manifest, segments that do not cover a tensor.
NamedTensors read_checkpoint_weights(const std::filesystem::path& dir);
// The model format a checkpoint's weights were written as (model.safetensors' "format": "hwtrain-gpt"
// for the built-in families, "hwtrain-module" for a user's TrainableModel); sharded: "hwtrain-gpt".
std::string checkpoint_model_format(const std::filesystem::path& dir);
// IoError unless the checkpoint holds one of hwtrain's own models (what eval, generate and export load).
void require_builtin_model_checkpoint(const std::filesystem::path& dir);
// The whole optimizer state: optimizer.safetensors, plus a sharded checkpoint's joined segments.
NamedTensors read_checkpoint_optimizer(const std::filesystem::path& dir);

class ShardedCheckpointReader;
// A sharded checkpoint's whole weights, and its whole AdamW state ("exp_avg.<param>",
// "exp_avg_sq.<param>", "step.<param>"), in the shards' parameter order; with `wanted`, those of
// the parameters it accepts only (a pipeline stage's). `eight_bit_as_stored`: a one-process
// checkpoint's 8-bit moments as their codes and scales ("exp_avg.q8.<param>",
// "exp_avg.absmax.<param>"), for an optimizer of whole tensors to load bit for bit; otherwise
// (a model split over ranks cuts the tensors) dequantized like every other.
using ParameterFilter = std::function<bool(const std::string& param)>;
NamedTensors read_sharded_weights(ShardedCheckpointReader& shards, const ParameterFilter& wanted = {});
NamedTensors read_sharded_optimizer_state(ShardedCheckpointReader& shards, const ParameterFilter& wanted = {},
                                          bool eight_bit_as_stored = false);

}  // namespace hwt
