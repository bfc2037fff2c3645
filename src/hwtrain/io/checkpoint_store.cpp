#include "hwtrain/io/checkpoint_store.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hwtrain/core/error.h"
#include "hwtrain/core/fault_injection.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/json_depth.h"
#include "hwtrain/io/chunk_checksums.h"

namespace hwt {

namespace {

using json = nlohmann::json;

constexpr const char* kFormat = "hwtrain-checkpoint";
// Version 2 (2026-11-28): chunk checksums as one hex string (io/chunk_checksums.h). Version 1
// markers (a list of numbers) are still read; a version 1 build refuses a version 2 marker by its
// version, not as a damaged one.
constexpr int kVersion = 2;
// Hidden prefixes: staging (being written), set aside (being replaced), being deleted.
constexpr const char* kStaging = ".tmp-";
constexpr const char* kAside = ".old-";
constexpr const char* kDeleting = ".del-";
// A marker lists a few files at ~100 bytes each; anything near this is not one.
constexpr uint64_t kMaxMarkerBytes = 16u << 20;

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::string pid_suffix() { return "-" + std::to_string(::getpid()); }

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// A leftover "<prefix>step_X-<pid>" may be cleaned if its writer is this process or is gone.
bool owner_is_gone(const std::string& name) {
  const auto dash = name.rfind('-');
  if (dash == std::string::npos || dash + 1 >= name.size()) return false;
  const std::string digits = name.substr(dash + 1);
  if (!all_digits(digits) || digits.size() > 9) return false;
  const pid_t pid = static_cast<pid_t>(std::stol(digits));
  if (pid == ::getpid()) return true;
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

// "<prefix>step_X-<pid>" -> "step_X"
std::string leftover_target(const std::string& name, const std::string& prefix) {
  return name.substr(prefix.size(), name.rfind('-') - prefix.size());
}

bool is_complete(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kCheckpointMarker, ec);
}

// Lists, checksums and fsyncs everything write_contents left in `staging`.
std::vector<CheckpointFile> seal_contents(const fs::path& staging, uint64_t chunk_bytes) {
  std::vector<CheckpointFile> files;
  std::vector<fs::path> entries;
  for (const auto& entry : fs::recursive_directory_iterator(staging)) entries.push_back(entry.path());
  std::sort(entries.begin(), entries.end());
  std::vector<uint64_t> sizes;
  for (const auto& p : entries) {
    if (fs::is_regular_file(fs::symlink_status(p))) sizes.push_back(fs::file_size(p));
  }
  chunk_bytes = marker_chunk_bytes(sizes, chunk_bytes);
  for (const auto& p : entries) {
    const std::string rel = p.lexically_relative(staging).generic_string();
    const auto status = fs::symlink_status(p);
    if (rel == kCheckpointMarker) {
      throw IoError("checkpoint contents may not include a file named COMPLETE (" + p.string() + ")");
    }
    if (fs::is_regular_file(status)) {
      const uint64_t size = fs::file_size(p);
      FileChecksums sums = file_checksums(p, chunk_bytes);
      if (sums.chunks.size() < 2) sums.chunks.clear();  // one chunk: the whole file's checksum says it
      files.push_back({rel, size, sums.whole, sums.chunks.empty() ? 0 : chunk_bytes, std::move(sums.chunks)});
    } else if (!fs::is_directory(status)) {
      throw IoError("checkpoint contents must be plain files and directories; " + p.string() +
                    " is neither");
    }
    fsync_path(p);
  }
  return files;
}

std::string manifest_json(int64_t step, const std::vector<CheckpointFile>& files) {
  json j = {{"format", kFormat}, {"version", kVersion}, {"step", step}, {"files", json::array()}};
  for (const auto& f : files) {
    json entry = {{"path", f.path}, {"size", f.size}, {"crc32c", f.crc32c}};
    write_marker_chunk_checksums(f, entry);
    j["files"].push_back(std::move(entry));
  }
  return j.dump(2) + "\n";
}

void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

}  // namespace

std::string checkpoint_name_of_step(int64_t step) { return step_name(step); }

std::optional<int64_t> checkpoint_step_from_name(const std::string& name) {
  if (!starts_with(name, "step_") || name.size() > 5 + 18) return std::nullopt;
  const std::string digits = name.substr(5);
  if (!all_digits(digits)) return std::nullopt;
  return std::stoll(digits);
}

CheckpointStore::CheckpointStore(fs::path dir, int64_t keep_last, uint64_t checksum_chunk_bytes)
    : dir_(std::move(dir)), keep_last_(keep_last), chunk_bytes_(checksum_chunk_bytes) {
  if (chunk_bytes_ < kMinChecksumChunkBytes || chunk_bytes_ > kMaxChecksumChunkBytes) {
    throw ConfigError("CheckpointStore: checksum chunk size " + std::to_string(chunk_bytes_) + " is outside [" +
                      std::to_string(kMinChecksumChunkBytes) + ", " + std::to_string(kMaxChecksumChunkBytes) + "] bytes");
  }
  if (keep_last_ < 1) {
    throw ConfigError("checkpoint.keep_last must be at least 1, got " + std::to_string(keep_last_));
  }
}

std::vector<fs::path> CheckpointStore::list() const {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return {};
  try {
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const auto step = checkpoint_step_from_name(entry.path().filename().string());
      if (step && entry.is_directory() && is_complete(entry.path())) found.emplace_back(*step, entry.path());
    }
  } catch (const fs::filesystem_error& e) {
    throw IoError("cannot list checkpoints in " + dir_.string() + ": " + e.code().message());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

std::optional<fs::path> CheckpointStore::latest() const {
  auto all = list();
  if (all.empty()) return std::nullopt;
  return all.back();
}

void CheckpointStore::clean_leftovers() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (starts_with(name, kStaging) || starts_with(name, kDeleting)) {
      if (owner_is_gone(name)) remove_quietly(entry.path());
    } else if (starts_with(name, kAside) && owner_is_gone(name)) {
      // A replace crashed between its two renames: the set-aside copy is the good checkpoint.
      const fs::path target = dir_ / leftover_target(name, kAside);
      if (!fs::exists(target) && is_complete(entry.path())) {
        rename_durable(entry.path(), target);
      } else {
        remove_quietly(entry.path());
      }
    }
  }
}

fs::path CheckpointStore::save(int64_t step,
                               const std::function<void(const fs::path& staging_dir)>& write_contents) {
  if (step < 0) throw IoError("checkpoint step must be >= 0, got " + std::to_string(step));
  ensure_writable_dir(dir_);
  clean_leftovers();

  const std::string name = step_name(step);
  const fs::path staging = dir_ / (kStaging + name + pid_suffix());
  const fs::path final_dir = dir_ / name;
  remove_quietly(staging);
  std::error_code ec;
  fs::create_directory(staging, ec);
  if (ec) throw IoError("cannot create " + staging.string() + ": " + ec.message());

  try {
    write_contents(staging);
    fault_point("checkpoint");
    const std::vector<CheckpointFile> files = seal_contents(staging, chunk_bytes_);
    write_file_atomic(staging / kCheckpointMarker, manifest_json(step, files));
    fsync_path(staging);
    if (fs::exists(final_dir)) {
      // Never lose a good checkpoint: the old one is deleted only once the new one is in place.
      const fs::path aside = dir_ / (kAside + name + pid_suffix());
      rename_durable(final_dir, aside);
      try {
        rename_durable(staging, final_dir);
      } catch (...) {
        if (!fs::exists(final_dir, ec)) fs::rename(aside, final_dir, ec);
        throw;
      }
      remove_quietly(aside);
    } else {
      rename_durable(staging, final_dir);
    }
  } catch (const fs::filesystem_error& e) {
    remove_quietly(staging);
    throw IoError("cannot write checkpoint " + final_dir.string() + ": " + e.what());
  } catch (...) {
    remove_quietly(staging);
    throw;
  }
  prune(final_dir);
  return final_dir;
}

void CheckpointStore::prune(const fs::path& keep) const {
  const std::vector<fs::path> all = list();
  if (static_cast<int64_t>(all.size()) <= keep_last_) return;
  int64_t excess = static_cast<int64_t>(all.size()) - keep_last_;
  for (const auto& ckpt : all) {  // oldest first
    if (excess == 0) break;
    if (ckpt == keep) continue;
    // Renamed out of sight first, so a crash mid-delete never leaves a half-deleted step_ dir.
    const fs::path doomed = dir_ / (kDeleting + ckpt.filename().string() + pid_suffix());
    rename_durable(ckpt, doomed);
    remove_quietly(doomed);
    --excess;
  }
}

fs::path resolve_checkpoint(const std::string& spec, const fs::path& default_dir) {
  if (spec == "latest") {
    if (auto latest = CheckpointStore(default_dir, 1).latest()) return *latest;
    throw IoError("no checkpoint found in " + default_dir.string() +
                  "; train first, or give a checkpoint directory (step_NNNNNNNN)");
  }
  if (spec.empty()) throw IoError("empty checkpoint path; give a checkpoint directory, a run directory or 'latest'");
  fs::path p = fs::path(spec).lexically_normal();  // "run/checkpoints/step_00000010/" names step_00000010
  if (!p.has_filename() && p.has_parent_path()) p = p.parent_path();
  std::error_code ec;
  if (!fs::exists(p, ec)) throw IoError("checkpoint " + p.string() + " does not exist");
  if (!fs::is_directory(p, ec)) {
    throw IoError(p.string() + " is not a directory; expected a checkpoint directory, a directory "
                  "of checkpoints, a run directory, or 'latest'");
  }
  if (is_complete(p)) return p;
  if (auto latest = CheckpointStore(p, 1).latest()) return *latest;
  const fs::path nested = p / "checkpoints";
  if (fs::is_directory(nested, ec)) {
    if (auto latest = CheckpointStore(nested, 1).latest()) return *latest;
    throw IoError("no complete checkpoint found in " + nested.string() +
                  "; train first, or give a checkpoint directory (step_NNNNNNNN)");
  }
  for (const auto& entry : fs::directory_iterator(p, ec)) {
    if (checkpoint_step_from_name(entry.path().filename().string())) {
      throw IoError("no complete checkpoint in " + p.string() + " (" +
                    entry.path().filename().string() +
                    " and any others lack the COMPLETE marker: their writes were interrupted)");
    }
  }
  throw IoError(p.string() + " is not a complete checkpoint (missing COMPLETE marker)");
}

CheckpointManifest read_checkpoint_manifest(const fs::path& ckpt) {
  const fs::path marker = ckpt / kCheckpointMarker;
  if (!is_complete(ckpt)) {
    throw IoError(ckpt.string() + " is not a complete checkpoint (missing COMPLETE marker)");
  }
  const std::string text = read_regular_file(marker, kMaxMarkerBytes);
  auto bad = [&](const std::string& why) {
    return IoError(marker.string() + " is malformed: " + why + " (the checkpoint is corrupt; use an earlier one)");
  };
  json j;
  try {
    j = parse_json_bounded(text);
  } catch (const json::exception& e) {
    throw bad(std::string("not valid JSON (") + e.what() + ")");
  }
  // Compared as JSON: value("format", "") would throw nlohmann's own error for a non-string.
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat) throw bad("no \"format\": \"" + std::string(kFormat) + "\"");
  if (!j.contains("version") || (j["version"] != 1 && j["version"] != kVersion)) {
    throw bad("unsupported version " + (j.contains("version") ? j["version"].dump() : "(none)") +
              " (this build reads versions 1 to " + std::to_string(kVersion) + "; a newer build wrote it?)");
  }
  if (!j.contains("step") || !j["step"].is_number_integer()) throw bad("no integer \"step\"");
  if (!j.contains("files") || !j["files"].is_array()) throw bad("no \"files\" list");
  CheckpointManifest m;
  m.step = j["step"].get<int64_t>();
  for (const auto& f : j["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned() || !f.contains("crc32c") || !f["crc32c"].is_number_unsigned() ||
        f["crc32c"].get<uint64_t>() > UINT32_MAX) {
      throw bad("file entry " + f.dump() + " lacks path, size or crc32c");
    }
    const std::string path = f["path"].get<std::string>();
    if (!is_path_inside_dir(path)) throw bad("file path '" + path + "' is not inside the checkpoint");
    m.files.push_back({path, f["size"].get<uint64_t>(), f["crc32c"].get<uint32_t>()});
    read_marker_chunk_checksums(f, m.files.back(), bad);
  }
  return m;
}

namespace {

[[noreturn]] void corrupt(const fs::path& ckpt, const std::string& what) {
  throw IoError("checkpoint " + ckpt.string() + " is corrupt: " + what + "; use an earlier checkpoint");
}

void verify_listed_file(const fs::path& ckpt, const CheckpointFile& f, bool check_crc = true) {
  const fs::path p = ckpt / f.path;
  std::error_code ec;
  const auto status = fs::symlink_status(p, ec);
  if (ec || !fs::exists(status)) corrupt(ckpt, f.path + " (listed in COMPLETE) is missing");
  if (!fs::is_regular_file(status)) corrupt(ckpt, p.string() + " is not a plain file (a link, FIFO or device)");
  const uint64_t size = fs::file_size(p, ec);
  if (ec || size != f.size) {
    corrupt(ckpt, p.string() + " has " + std::to_string(size) + " bytes, COMPLETE records " +
                      std::to_string(f.size) + " (truncated or modified)");
  }
  if (check_crc && file_checksums(p, 0).whole != f.crc32c) corrupt(ckpt, p.string() + " fails its CRC32C check (modified or damaged)");
}

// A checkpoint is sealed: every file in it is listed in COMPLETE (so every file a checkpoint's
// own files name, like tokenizer.json's model file, is checksummed too).
void verify_nothing_unlisted(const fs::path& ckpt, const CheckpointManifest& m) {
  std::vector<std::string> listed;
  for (const auto& f : m.files) listed.push_back(f.path);
  std::sort(listed.begin(), listed.end());
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(ckpt, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(ckpt).generic_string();
    const auto status = it->symlink_status(ec);
    if (rel == kCheckpointMarker || fs::is_directory(status)) continue;
    if (!std::binary_search(listed.begin(), listed.end(), rel)) {
      corrupt(ckpt, it->path().string() + " is not listed in COMPLETE (added after the checkpoint was written)");
    }
  }
  if (ec) throw IoError("cannot list " + ckpt.string() + ": " + ec.message());
}

}  // namespace

void verify_checkpoint(const fs::path& ckpt) {
  const CheckpointManifest m = read_checkpoint_manifest(ckpt);
  for (const auto& f : m.files) verify_listed_file(ckpt, f);
  verify_nothing_unlisted(ckpt, m);
}

void verify_checkpoint(const fs::path& ckpt, const std::function<bool(const std::string&)>& deferred) {
  const CheckpointManifest m = read_checkpoint_manifest(ckpt);
  for (const auto& f : m.files) verify_listed_file(ckpt, f, !deferred(f.path));
  verify_nothing_unlisted(ckpt, m);
}

void verify_checkpoint_file(const fs::path& ckpt, const CheckpointFile& file) { verify_listed_file(ckpt, file); }

void verify_checkpoint_file(const fs::path& ckpt, const std::string& path) {
  const CheckpointManifest m = read_checkpoint_manifest(ckpt);
  for (const auto& f : m.files) {
    if (f.path == path) return verify_listed_file(ckpt, f);
  }
  corrupt(ckpt, path + " is not listed in its COMPLETE marker");
}

}  // namespace hwt
