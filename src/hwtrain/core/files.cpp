#include "hwtrain/core/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "hwtrain/core/error.h"

namespace hwt {

namespace {
std::string errno_text() { return std::strerror(errno); }
}  // namespace

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read " + path.string() + ": " + errno_text());
  std::error_code ec;  // a directory opens as a stream of no bytes: never what the caller meant
  if (fs::is_directory(path, ec)) throw IoError("cannot read " + path.string() + ": it is a directory, not a file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw IoError("error while reading " + path.string());
  return ss.str();
}

namespace {
const char* file_kind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void refuse(const fs::path& path, const std::string& why) {
  throw IoError("refusing to read " + path.string() + ": " + why);
}
}  // namespace

std::string read_regular_file(const fs::path& path, uint64_t max_bytes) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) throw IoError("cannot read " + path.string() + ": " + errno_text());
  if (!S_ISREG(st.st_mode)) refuse(path, std::string("it is ") + file_kind(st.st_mode) + ", not a plain file");
  const auto too_big = [&](uint64_t size) {
    refuse(path, "it has " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                     " bytes such a file may have");
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) too_big(static_cast<uint64_t>(st.st_size));
  // O_NONBLOCK | O_NOFOLLOW: a file swapped for a FIFO or a link after the lstat still cannot block or redirect us.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) throw IoError("cannot read " + path.string() + ": " + errno_text());
  std::string out;
  try {
    if (::fstat(fd, &st) != 0) throw IoError("cannot stat " + path.string() + ": " + errno_text());
    if (!S_ISREG(st.st_mode)) refuse(path, std::string("it is ") + file_kind(st.st_mode) + ", not a plain file");
    if (static_cast<uint64_t>(st.st_size) > max_bytes) too_big(static_cast<uint64_t>(st.st_size));
    out.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::read(fd, &out[done], out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IoError("error while reading " + path.string() + ": " + errno_text());
      if (n == 0) break;  // shrank while we read: what is there is what the checksums will judge
      done += static_cast<size_t>(n);
    }
    out.resize(done);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

std::string read_linked_file(const fs::path& path, uint64_t max_bytes) {
  std::error_code ec;
  const fs::path target = fs::canonical(path, ec);
  return read_regular_file(ec ? path : target, max_bytes);  // a dangling link is named as given
}

bool is_path_inside_dir(const std::string& name) {
  if (name.empty() || name.front() == '/' || name.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

void fsync_path(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open " + path.string() + " to fsync: " + errno_text());
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some filesystems refuse fsync on directories (EINVAL); the rename is still atomic there.
  if (rc != 0 && saved != EINVAL) {
    throw IoError("fsync failed for " + path.string() + ": " + std::strerror(saved));
  }
}

fs::path temp_sibling(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  return parent / ("." + path.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                   std::to_string(counter++));
}

bool hold_temp_file(int fd) { return ::flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK; }

int remove_abandoned_temps(const fs::path& path) {
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string prefix = "." + path.filename().string() + ".tmp-";
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path file = it->path();
    if (file.filename().string().rfind(prefix, 0) != 0) continue;
    const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    // A file of no bytes may be one a writer has just created and not yet locked.
    const bool abandoned = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
                           ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (abandoned && ::unlink(file.c_str()) == 0) ++removed;
    ::close(fd);
  }
  return removed;
}

void rename_durable(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw IoError("cannot rename " + from.string() + " to " + to.string() + ": " + ec.message());
  fsync_path(to.has_parent_path() ? to.parent_path() : fs::path("."));
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  fs::path tmp = temp_sibling(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError("cannot write " + path.string() + ": " + errno_text());
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string why = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw IoError("cannot write " + path.string() + ": " + why);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw IoError("cannot flush " + path.string() + ": " + why);
  }
  rename_durable(tmp, path);
}

void ensure_writable_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create directory " + dir.string() + ": " + ec.message());
  fs::path probe = temp_sibling(dir / "write-probe");
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw IoError("cannot write to directory " + dir.string() + ": " + errno_text() +
                  " (choose another with --out)");
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

fs::path timestamped_path(const fs::path& parent, const std::string& prefix) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  const std::string name = prefix + stamp;
  fs::path dir = parent / name;
  for (int i = 1; fs::exists(dir); ++i) dir = parent / (name + "-" + std::to_string(i));
  return dir;
}

}  // namespace hwt
