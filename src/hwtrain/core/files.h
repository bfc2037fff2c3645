// Crash-safe file and directory writing: write to a temporary path, fsync, rename into place, so
// that a reader never sees a partial file and an existing good file is never half-overwritten.
// Also small read helpers that throw IoError naming the path.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace hwt {

namespace fs = std::filesystem;

// Reads a whole file; throws IoError naming the path if it cannot.
std::string read_file(const fs::path& path);

// Reads a whole file that a checkpoint or dataset names: it must be a regular file (not a
// symlink, FIFO or device; checked with lstat before opening, and the open never blocks) of at
// most `max_bytes` (checked before reading). Throws IoError naming the path and what is wrong.
std::string read_regular_file(const fs::path& path, uint64_t max_bytes);
// The same for a file a user names or a Hugging Face directory holds, which may be a symbolic link
// (a hub snapshot's files link to its blobs/): the link's target, with the same checks.
std::string read_linked_file(const fs::path& path, uint64_t max_bytes);

// True when `name` names something inside a directory: a non-empty relative path none of whose
// components is empty, "." or "..". The one check for every file name that a checkpoint's
// COMPLETE list, a dataset manifest or a tokenizer.json holds.
bool is_path_inside_dir(const std::string& name);

// Writes `content` to `path` atomically (temp file in the same directory, fsync, rename, fsync dir).
void write_file_atomic(const fs::path& path, const std::string& content);

// fsync a file or a directory by path; throws IoError on failure.
void fsync_path(const fs::path& path);

// Renames `from` to `to` (which must not exist, or be an empty dir) and fsyncs the parent.
void rename_durable(const fs::path& from, const fs::path& to);

// Creates `dir` (and parents) and checks it is writable by creating and removing a probe file;
// throws IoError "cannot write to <dir>: <reason>" before any work starts.
void ensure_writable_dir(const fs::path& dir);

// A unique sibling path for temporary output: "<parent>/.<name>.tmp-<pid>-<counter>".
fs::path temp_sibling(const fs::path& path);

// Marks `fd`, a temporary file this process writes, as in use (an flock it holds until close), so
// that remove_abandoned_temps in another process leaves it alone. False only when another process
// holds the lock; a file system without flock is no error (nothing is removed there either).
bool hold_temp_file(int fd);

// Removes the temporary siblings of `path` (".<name>.tmp-*") that no live writer holds: those of a
// writer killed before it could clean up. Returns how many were removed. Locks that a file system
// keeps per host (Lustre's localflock, NFS mounted with local_lock=flock) do not protect another
// host's writer: keep shared caches on file systems with real locks, or one writer at a time.
int remove_abandoned_temps(const fs::path& path);

// parent/<prefix><YYYYmmdd-HHMMSS> in local time, with "-1", "-2", ... appended while that
// exists: a new run directory's name (not created).
fs::path timestamped_path(const fs::path& parent, const std::string& prefix = "");

}  // namespace hwt
