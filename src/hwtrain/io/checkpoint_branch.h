// A run resumed from an earlier checkpoint of its own directory starts a new history there: the
// checkpoints saved after that step (step_ directories and best_<metric> copies of later steps)
// belong to the history it abandons. Left in place, "latest" (--resume latest, eval, generate,
// export) would pick them, and pruning would delete the new run's checkpoints before them. They are
// moved, whole and complete, into one folder beside them, which the store does not list.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace hwt {

struct SupersededCheckpoints {
  std::filesystem::path folder;                  // <dir>/superseded_after_step_00000002[_2, _3, ...]
  std::vector<std::filesystem::path> moved;      // their names inside it
};

// Moves the checkpoints of `dir` (a CheckpointStore's) saved after `step` into a new folder of it;
// nullopt when there are none (nothing is created). IoError naming the path on a failed move.
std::optional<SupersededCheckpoints> set_aside_checkpoints_after(const std::filesystem::path& dir, int64_t step);

}  // namespace hwt
