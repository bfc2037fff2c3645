// Setting aside the checkpoints of an abandoned history (see checkpoint_branch.h).
#include "hwtrain/io/checkpoint_branch.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/io/checkpoint_store.h"

namespace hwt {

namespace {

// The step a best_<metric> copy was saved at (its marker's), or nullopt when it is unreadable.
std::optional<int64_t> best_copy_step(const fs::path& p) {
  try {
    return read_checkpoint_manifest(p).step;
  } catch (const IoError&) {
    return std::nullopt;
  }
}

std::vector<fs::path> later_than(const fs::path& dir, int64_t step) {
  std::vector<fs::path> later;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    std::optional<int64_t> saved = checkpoint_step_from_name(name);
    if (!saved && name.rfind("best_", 0) == 0) saved = best_copy_step(entry.path());
    if (saved && *saved > step) later.push_back(entry.path());
  }
  std::sort(later.begin(), later.end());
  return later;
}

}  // namespace

std::optional<SupersededCheckpoints> set_aside_checkpoints_after(const fs::path& dir, int64_t step) {
  const std::vector<fs::path> later = later_than(dir, step);
  if (later.empty()) return std::nullopt;
  char base[64];
  std::snprintf(base, sizeof base, "superseded_after_step_%08lld", static_cast<long long>(step));
  SupersededCheckpoints out{dir / base, {}};
  for (int n = 2; fs::exists(out.folder); ++n) out.folder = dir / (std::string(base) + "_" + std::to_string(n));
  std::error_code ec;
  fs::create_directory(out.folder, ec);
  if (ec) throw IoError("cannot create " + out.folder.string() + ": " + ec.message());
  for (const fs::path& p : later) {
    rename_durable(p, out.folder / p.filename());  // IoError naming both paths
    out.moved.push_back(p.filename());
  }
  fsync_path(dir);  // the entries gone from it
  return out;
}

}  // namespace hwt
