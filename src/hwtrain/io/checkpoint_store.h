// CheckpointStore: a directory of checkpoints, each a subdirectory `step_<8-digit step>` holding
// whatever files the caller writes plus a `COMPLETE` marker (JSON: format, version, step, and each
// file's size and CRC32C). A checkpoint becomes visible only once complete: it is written into a
// hidden staging directory, fsynced, and renamed into place; a crash at any point leaves either
// the old set of checkpoints or the new one, never a partial checkpoint and never fewer good ones.
// Also resolves `--resume` specs ("latest" or a path) and verifies a checkpoint against its
// marker. What goes inside a checkpoint (weights, optimizer state, config) is the trainer's.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hwt {

namespace fs = std::filesystem;

// The name of the marker file that makes a checkpoint directory complete.
inline constexpr const char* kCheckpointMarker = "COMPLETE";
// The chunk size of the per-chunk checksums new checkpoints record (io/chunk_checksums.h): a reader
// of a range checks at most 2 x 1 MiB more than it needs. The marker holds each file's chunk
// checksums as one hex string (8 characters a chunk) and at most kMaxMarkerChunks of them: a
// checkpoint larger than 1 TiB gets chunks of 2 MiB, 4 MiB, ... up to 1 GiB (the marker stays under
// 9 MiB of its 16 MiB bound; past about 1 PiB the save is refused). Markers of older builds (16 MiB
// chunks, a JSON list of numbers, version 1) are still read.
inline constexpr uint64_t kChecksumChunkBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxMarkerChunks = uint64_t{1} << 20;
// The chunk sizes a marker may record (and a store may be given): 4 KiB to 1 GiB.
inline constexpr uint64_t kMinChecksumChunkBytes = uint64_t{4} << 10, kMaxChecksumChunkBytes = uint64_t{1} << 30;

class CheckpointStore {
 public:
  // `dir` need not exist until the first save(). keep_last >= 1 (ConfigError otherwise). Files of
  // more than checksum_chunk_bytes (4 KiB to 1 GiB; ConfigError otherwise) get a checksum per chunk too
  // (per chunk of twice, four times, ... that size where a checkpoint would need more than
  // kMaxMarkerChunks).
  CheckpointStore(fs::path dir, int64_t keep_last, uint64_t checksum_chunk_bytes = kChecksumChunkBytes);

  // Writes checkpoint `step` (>= 0): calls write_contents(staging_dir), which writes files (and
  // subdirectories) into staging_dir; then writes the COMPLETE marker, fsyncs everything, renames
  // the staging dir to step_XXXXXXXX (replacing an existing checkpoint of that step only after the
  // new one is in place), and prunes to the newest keep_last checkpoints (never the one just
  // written). Returns the checkpoint's path. If write_contents throws, the staging dir is removed,
  // the exception propagates, and no existing checkpoint is touched.
  fs::path save(int64_t step, const std::function<void(const fs::path& staging_dir)>& write_contents);

  // Complete checkpoints (step_<digits> directories with a COMPLETE marker), sorted by step.
  std::vector<fs::path> list() const;
  // The complete checkpoint with the highest step, if any.
  std::optional<fs::path> latest() const;
  const fs::path& dir() const { return dir_; }
  int64_t keep_last() const { return keep_last_; }

 private:
  // Removes staging and deleted-checkpoint leftovers of dead processes; restores a checkpoint set
  // aside by a replace that crashed before the new one was in place.
  void clean_leftovers() const;
  void prune(const fs::path& keep) const;

  fs::path dir_;
  int64_t keep_last_;
  uint64_t chunk_bytes_;
};

// A checkpoint's directory name: 100 -> "step_00000100".
std::string checkpoint_name_of_step(int64_t step);
// The step a checkpoint directory name encodes ("step_00000100" -> 100), or nullopt.
std::optional<int64_t> checkpoint_step_from_name(const std::string& name);

// Resolves a --resume spec. "latest": the newest complete checkpoint under default_dir. A path:
// a checkpoint directory (with COMPLETE), a directory of checkpoints (its latest), or a run
// directory containing checkpoints/ (its latest). Throws IoError naming the path when it does not
// exist, holds no complete checkpoint, or is a directory without a COMPLETE marker.
fs::path resolve_checkpoint(const std::string& spec, const fs::path& default_dir);

// One file recorded in a COMPLETE marker; `path` is relative to the checkpoint directory.
struct CheckpointFile {
  std::string path;
  uint64_t size = 0;
  uint32_t crc32c = 0;
  // A file of more than one chunk: the CRC32C of each chunk_bytes-sized chunk, for readers of part
  // of it (io/chunk_checksums.h). Empty for a smaller file, and in markers of older builds.
  uint64_t chunk_bytes = 0;
  std::vector<uint32_t> chunk_crc32c;
};

struct CheckpointManifest {
  int64_t step = 0;
  std::vector<CheckpointFile> files;
};

// Parses ckpt/COMPLETE; throws IoError naming the marker if it is missing or malformed.
CheckpointManifest read_checkpoint_manifest(const fs::path& ckpt);

// Checks that every file the COMPLETE marker lists is a plain file with the recorded size and
// CRC32C, and that the checkpoint holds no file the marker does not list; throws IoError naming
// the file and what differs otherwise. Every command that loads a checkpoint calls this first
// (eval, generate, and train --resume through read_training_checkpoint).
void verify_checkpoint(const fs::path& ckpt);
// The same, leaving the CRC32C of the listed files `deferred` selects to whoever reads them
// (verify_checkpoint_file): a ZeRO-2/3 rank resuming reads only the shard files that hold its
// segments, and checks just those. Presence and sizes of every file are checked here.
void verify_checkpoint(const fs::path& ckpt, const std::function<bool(const std::string& path)>& deferred);

// The same check for one listed file (`path` relative to ckpt), for reading a small part of a
// checkpoint (its config.toml) before the rest; IoError also when the marker does not list it.
void verify_checkpoint_file(const fs::path& ckpt, const std::string& path);
// The same for a file of the marker already read (its entry).
void verify_checkpoint_file(const fs::path& ckpt, const CheckpointFile& file);

}  // namespace hwt
