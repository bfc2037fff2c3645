// CheckpointStore under a full disk: a save whose writes fail (RLIMIT_FSIZE in a forked child,
// SIGXFSZ ignored, so write() returns EFBIG as on a full filesystem) reports the file it could not
// write and leaves the previous checkpoint complete, valid and the latest.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/io/safetensors.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

// Runs store.save(step, write) in a child whose files may not exceed `limit` bytes; returns the
// child's IoError message, sent through a pipe ("" with a failure if the save did not fail so).
std::string save_with_file_size_limit(CheckpointStore& store, int64_t step,
                                      const std::function<void(const fs::path&)>& write, rlim_t limit) {
  int fds[2];
  if (::pipe(fds) != 0) ADD_FAILURE() << "pipe";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{limit, limit};
    int code = 3;
    if (::setrlimit(RLIMIT_FSIZE, &lim) == 0) {
      try {
        store.save(step, write);
        code = 1;  // the limit did not bite
      } catch (const IoError& e) {
        const std::string msg = e.what();
        code = ::write(fds[1], msg.data(), msg.size()) == static_cast<ssize_t>(msg.size()) ? 0 : 4;
      } catch (...) {
        code = 2;
      }
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << " (1: saved, 2: not an IoError)";
  return msg;
}

TEST(CheckpointFaults, FullDiskDuringSaveNamesTheFileAndKeepsThePreviousCheckpoint) {
  testing::TempDir tmp;
  CheckpointStore store(tmp / "ckpts", 3);
  const NamedTensors small = {{"w", torch::ones({64})}};
  const NamedTensors big = {{"w", torch::ones({256 * 1024})}};  // 1 MiB, over the child's limit
  const fs::path good = store.save(1, [&](const fs::path& staging) {
    save_safetensors(staging / "model.safetensors", small);
  });
  const std::string msg = save_with_file_size_limit(
      store, 2, [&](const fs::path& staging) { save_safetensors(staging / "model.safetensors", big); }, 256 * 1024);
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::strerror(EFBIG)), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // The previous checkpoint is the latest, complete and valid; no staging directory is left.
  ASSERT_EQ(store.list(), std::vector<fs::path>{good});
  EXPECT_NO_THROW(verify_checkpoint(good));
  EXPECT_EQ(load_safetensors(good / "model.safetensors").tensors.at(0).second.numel(), 64);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(store.dir())) entries += e.path() != good;
  EXPECT_EQ(entries, 0) << "leftovers in " << store.dir();
  // The same when the disk fills up on the marker, after every content file fit.
  const std::string marker_msg = save_with_file_size_limit(
      store, 3, [&](const fs::path& staging) { write_file_atomic(staging / "state.json", "x"); }, 1);
  EXPECT_NE(marker_msg.find(kCheckpointMarker), std::string::npos) << marker_msg;
  EXPECT_NE(marker_msg.find(std::strerror(EFBIG)), std::string::npos) << marker_msg;
  EXPECT_EQ(store.list(), std::vector<fs::path>{good});
  EXPECT_NO_THROW(verify_checkpoint(good));
}

}  // namespace
}  // namespace hwt
