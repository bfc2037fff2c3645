// reseal_checkpoint: rewrites a checkpoint in place with some files replaced and a fresh COMPLETE
// marker (through CheckpointStore, as the trainer writes checkpoints), so its checksums hold while
// its contents are bad: what the checks behind the checksums (ranges, paths, finite weights) face.
#pragma once
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "hwtrain/io/checkpoint_store.h"

namespace hwt::testing {

inline std::filesystem::path reseal_checkpoint(const std::filesystem::path& ckpt,
                                               const std::map<std::string, std::string>& replaced) {
  namespace fs = std::filesystem;
  const auto step = checkpoint_step_from_name(ckpt.filename().string());
  CheckpointStore store(ckpt.parent_path(), 1000);
  return store.save(step.value(), [&](const fs::path& staging) {
    for (const auto& entry : fs::recursive_directory_iterator(ckpt)) {
      const fs::path rel = entry.path().lexically_relative(ckpt);
      if (rel == kCheckpointMarker || replaced.count(rel.generic_string())) continue;
      if (entry.is_directory()) {
        fs::create_directories(staging / rel);
      } else {
        fs::copy_file(entry.path(), staging / rel);
      }
    }
    for (const auto& [name, content] : replaced) std::ofstream(staging / name, std::ios::binary) << content;
  });
}

}  // namespace hwt::testing
