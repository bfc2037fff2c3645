// ShardedCheckpointReader: a ZeRO-2/3 checkpoint (train/sharded_checkpoint.h) read range by range,
// so that a rank resuming a sharded run reads only its own segments: on the world size the
// checkpoint was written with, its own shard file; on another, the two or three whose segments
// overlap its own. Opening reads sharding.json and every shard file's header (not its data), and
// checks, before any data is read, that the segments of every tensor sharding.json names tile it
// exactly (no gap: a shard missing; no overlap: a shard repeated or from another run), for the
// weights and for the AdamW state alike. read() then gives any element range of a tensor from the
// shard files holding it, read with pread into memory of its own (never mapped: a file truncated
// under a mapping is a SIGBUS). With `verify_on_read`, what is read is checked against the COMPLETE
// marker's checksums first: the chunks of a file that a read touches, and its header's, each once
// (io/chunk_checksums.h; a file the marker records without chunks, whole, the first time).
// read_training_checkpoint checks every other file up front and leaves the shards' checksums to
// this reader (verify_checkpoint with `deferred`).
//
// Keys: "model.<param>" (the fp32 master weights), "optimizer.exp_avg.<param>",
// "optimizer.exp_avg_sq.<param>", and "optimizer.step.<param>" (a scalar every segment repeats).
// A moment's segment may be stored in 8 bits (AdamW's "exp_avg.q8.<segment>" codes beside their
// "exp_avg.absmax.<segment>" block scales): read() dequantizes the blocks a range touches.
// open_whole reads a one-process checkpoint (model.safetensors, optimizer.safetensors) the same way,
// each tensor one piece of its file (8-bit moments too), so that a ZeRO-2/3 rank resuming it reads
// its own ranges only (train/whole_checkpoint_index.cpp).
// Not thread-safe; one reader per rank.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hwtrain/io/chunk_checksums.h"
#include "hwtrain/io/safetensors.h"

namespace hwt {

class ShardedCheckpointReader {
 public:
  // IoError naming the file for a missing or malformed sharding.json or shard file, an entry that is
  // not a segment ("<name>@<offset>") or belongs to no tensor, and segments that do not tile a tensor.
  explicit ShardedCheckpointReader(std::filesystem::path dir, bool verify_on_read = false);
  // A one-process checkpoint's weights and AdamW state by the same keys (world_size() 1), or null
  // when its moments are not fp32/bf16/fp16 tensors or 8-bit codes of every weight (none yet, a
  // library model's fp64): read those whole. IoError for a malformed header, or 8-bit codes without
  // their block scales.
  static std::shared_ptr<ShardedCheckpointReader> open_whole(const std::filesystem::path& dir, bool verify_on_read);
  bool whole_checkpoint() const { return whole_; }
  // The whole checkpoint's other optimizer.safetensors entries (the loss scaler, RNG states) in
  // their own dtypes and shapes; empty for a sharded one.
  std::vector<std::pair<std::string, torch::Tensor>> other_entries();

  const std::filesystem::path& dir() const { return dir_; }
  int world_size() const { return world_size_; }
  // The parameters sharding.json names, in the order their weights' first segments appear in the
  // shard files (rank 0's first; within a file, safetensors' order), with their whole shapes.
  const std::vector<std::pair<std::string, std::vector<int64_t>>>& parameters() const { return params_; }

  // Elements [offset, offset + count) of the flattened tensor `key`, as fp32 (a scalar key: its
  // value, from the last segment at or before `offset`, the one beside those elements' moments;
  // count is ignored). IoError for an unknown key, a range outside the
  // tensor, a shard file shorter than its header says (changed since it was opened) or failing
  // its checksum.
  torch::Tensor read(const std::string& key, int64_t offset, int64_t count);
  // The whole tensor `key`, in its shape.
  torch::Tensor whole(const std::string& key);
  // A moment's elements [offset, offset + count) as stored, when one segment of 8-bit codes holds
  // exactly them: its codes and block scales (a resume on the checkpoint's world size loads them as
  // they are; dequantized and quantized again, a block whose largest value is negative would not
  // come back exactly). Nullopt otherwise.
  std::optional<std::pair<torch::Tensor, torch::Tensor>> eight_bit(const std::string& key, int64_t offset, int64_t count);

  // The files whose data has been read so far (names), the bytes read from them, and the bytes
  // whose checksums were checked (verify_on_read: the chunks holding them and the headers).
  std::vector<std::string> files_read() const;
  int64_t bytes_read() const { return bytes_read_; }
  int64_t bytes_checked() const;

 private:
  struct Piece {
    int file = 0;
    size_t entry = 0;  // in files_[file].entries
    int64_t offset = 0, numel = 0;
    int q8 = 0;         // 8-bit codes of a moment (1: signed, the first; 2: unsigned, the second), else 0
    size_t absmax = 0;  // their block scales' entry
  };
  size_t scales_of(int file, const std::string& codes_entry, int64_t numel,
                   const std::string& prefix = "optimizer.") const;
  struct Tensor {
    std::vector<int64_t> shape;
    int64_t numel = 0;
    std::vector<Piece> pieces;  // sorted by offset once the shards are indexed
  };

  ShardedCheckpointReader(std::filesystem::path dir, bool verify_on_read, bool whole);
  void index_shard(int rank);
  bool index_whole();  // false: the optimizer's moments are not all tensors or 8-bit codes of the weights
  bool index_whole_eight_bit(size_t entry);  // false: not 8-bit codes of a weight's moment
  void add_file(const std::string& name);
  void read_raw(const Piece& p, int64_t from, int64_t to, torch::Tensor out);
  void check_tiling() const;
  const Tensor& find(const std::string& key) const;
  int64_t numel_of_param(const std::string& step_key) const;
  void read_piece(const Piece& p, int64_t from, int64_t to, torch::Tensor out);
  void verify_range(int file, uint64_t from, uint64_t to);

  std::filesystem::path dir_;
  bool verify_on_read_ = false;
  int world_size_ = 0;
  std::vector<std::pair<std::string, std::vector<int64_t>>> params_;
  std::map<std::string, Tensor> tensors_;    // by key
  bool whole_ = false;
  std::vector<SafetensorsHeader> files_;     // by rank (a whole checkpoint: model, optimizer)
  std::vector<std::string> file_names_;      // the same order
  std::vector<size_t> others_;               // a whole checkpoint's other optimizer entries
  std::set<int> read_;                       // ranks whose files were read (and verified)
  std::optional<CheckpointManifest> manifest_;  // COMPLETE, read at the first verified read
  std::map<int, RangeVerifier> verifiers_;   // by file
  int64_t bytes_read_ = 0;
};

}  // namespace hwt
