// CheckpointStore: save/list/latest/prune, failure atomicity, crash leftovers, --resume resolution
// and verification against the COMPLETE marker.
#include "hwtrain/io/checkpoint_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

using testing::TempDir;

// Writes `content` to staging/name.
std::function<void(const fs::path&)> writes(const std::string& name, const std::string& content) {
  return [=](const fs::path& staging) { write_file_atomic(staging / name, content); };
}

std::vector<std::string> names_of(const std::vector<fs::path>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(p.filename().string());
  return out;
}

// Every entry of `dir`, hidden ones included, sorted.
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The pid of a process that has exited (and been reaped), to stand for a crashed run.
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an IoError";
  return "";
}

TEST(CheckpointStore, SavesListsAndPrunesToKeepLast) {
  TempDir tmp;
  CheckpointStore store(tmp / "ckpts", 2);
  EXPECT_TRUE(store.list().empty());  // directory does not exist yet
  EXPECT_FALSE(store.latest().has_value());
  for (int64_t step : {100, 200, 300}) {
    const fs::path p = store.save(step, writes("model.bin", "weights at " + std::to_string(step)));
    EXPECT_EQ(p, tmp / "ckpts" / ("step_00000" + std::to_string(step)));
    EXPECT_EQ(read_file(p / "model.bin"), "weights at " + std::to_string(step));
  }
  EXPECT_EQ(names_of(store.list()), (std::vector<std::string>{"step_00000200", "step_00000300"}));
  EXPECT_EQ(store.latest()->filename(), "step_00000300");
  // No staging, set-aside or deleted directories are left behind.
  EXPECT_EQ(entries(store.dir()), (std::vector<std::string>{"step_00000200", "step_00000300"}));

  const CheckpointManifest m = read_checkpoint_manifest(*store.latest());
  EXPECT_EQ(m.step, 300);
  ASSERT_EQ(m.files.size(), 1u);
  EXPECT_EQ(m.files[0].path, "model.bin");
  EXPECT_EQ(m.files[0].size, std::string("weights at 300").size());
}

TEST(CheckpointStore, ListSortsByStepNumberNotName) {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 10);
  store.save(123456789, writes("a", "x"));  // more than 8 digits
  store.save(99, writes("a", "x"));
  store.save(7, writes("a", "x"));
  EXPECT_EQ(names_of(store.list()), (std::vector<std::string>{"step_00000007", "step_00000099", "step_123456789"}));
}

TEST(CheckpointStore, KeepsSubdirectoriesAndRecordsEveryFile) {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 1);
  const fs::path p = store.save(5, [](const fs::path& staging) {
    fs::create_directories(staging / "optim");
    write_file_atomic(staging / "optim" / "state.bin", "abc");
    write_file_atomic(staging / "config.toml", "[model]\n");
  });
  const auto m = read_checkpoint_manifest(p);
  ASSERT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.files[0].path, "config.toml");
  EXPECT_EQ(m.files[1].path, "optim/state.bin");
  EXPECT_NO_THROW(verify_checkpoint(p));
}

TEST(CheckpointStore, ReplacingAStepKeepsOnlyTheNewContents) {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 3);
  store.save(100, writes("model.bin", "old"));
  const fs::path p = store.save(100, writes("model.bin", "new"));
  EXPECT_EQ(read_file(p / "model.bin"), "new");
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"step_00000100"}));
  EXPECT_NO_THROW(verify_checkpoint(p));
}

TEST(CheckpointStore, FailedWriteLeavesPreviousCheckpointsIntact) {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 1);
  store.save(100, writes("model.bin", "good"));
  auto failing = [](const fs::path& staging) {
    write_file_atomic(staging / "model.bin", "partial");
    throw std::runtime_error("disk full (simulated)");
  };
  EXPECT_THROW(store.save(200, failing), std::runtime_error);
  EXPECT_THROW(store.save(100, failing), std::runtime_error);  // a failed replace, too
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"step_00000100"}));
  EXPECT_EQ(read_file(tmp / "step_00000100" / "model.bin"), "good");
  EXPECT_NO_THROW(verify_checkpoint(tmp / "step_00000100"));
}

TEST(CheckpointStore, ContentsMayNotClaimTheMarkerName) {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 1);
  EXPECT_THROW(store.save(1, writes("COMPLETE", "fake")), IoError);
  EXPECT_TRUE(entries(tmp.path()).empty());
}

TEST(CheckpointStore, IgnoresAndCleansLeftoversOfCrashedRuns) {
  TempDir tmp;
  const std::string dead = std::to_string(dead_pid());
  tmp.write(".tmp-step_00000500-" + dead + "/model.bin", "half written");
  tmp.write(".del-step_00000050-" + dead + "/model.bin", "half deleted");
  tmp.write("step_00000600/model.bin", "no marker");  // incomplete, not created by the store
  CheckpointStore store(tmp.path(), 3);
  EXPECT_TRUE(store.list().empty());
  store.save(10, writes("model.bin", "ok"));
  EXPECT_EQ(names_of(store.list()), (std::vector<std::string>{"step_00000010"}));
  // Leftovers of the dead run are gone; the directory the store did not create is left alone.
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"step_00000010", "step_00000600"}));
}

TEST(CheckpointStore, LeavesStagingOfLiveProcessesAlone) {
  TempDir tmp;
  const std::string parent = std::to_string(::getppid());  // alive while this test runs
  tmp.write(".tmp-step_00000500-" + parent + "/model.bin", "being written");
  CheckpointStore store(tmp.path(), 3);
  store.save(10, writes("model.bin", "ok"));
  EXPECT_TRUE(fs::exists(tmp / (".tmp-step_00000500-" + parent)));
}

TEST(CheckpointStore, RestoresACheckpointSetAsideByACrashedReplace) {
  TempDir tmp;
  CheckpointStore elsewhere(tmp / "build", 1);
  const fs::path good = elsewhere.save(700, writes("model.bin", "good"));
  CheckpointStore store(tmp / "ckpts", 3);
  fs::create_directories(store.dir());
  fs::rename(good, store.dir() / (".old-step_00000700-" + std::to_string(dead_pid())));
  EXPECT_TRUE(store.list().empty());
  store.save(800, writes("model.bin", "next"));
  EXPECT_EQ(names_of(store.list()), (std::vector<std::string>{"step_00000700", "step_00000800"}));
  EXPECT_EQ(read_file(store.dir() / "step_00000700" / "model.bin"), "good");
}

TEST(CheckpointStore, PruningNeverRemovesTheCheckpointJustWritten) {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 1);
  store.save(300, writes("m", "x"));
  const fs::path p = store.save(100, writes("m", "y"));  // an older step, e.g. after resuming early
  EXPECT_TRUE(fs::exists(p / "COMPLETE"));
  EXPECT_EQ(names_of(store.list()), (std::vector<std::string>{"step_00000100"}));
}

TEST(CheckpointStore, RejectsBadArguments) {
  TempDir tmp;
  EXPECT_THROW(CheckpointStore(tmp.path(), 0), ConfigError);
  CheckpointStore store(tmp.path(), 1);
  EXPECT_THROW(store.save(-1, writes("m", "x")), IoError);
}

TEST(CheckpointStore, StepFromName) {
  EXPECT_EQ(checkpoint_step_from_name("step_00000100"), 100);
  EXPECT_EQ(checkpoint_step_from_name("step_0"), 0);
  EXPECT_FALSE(checkpoint_step_from_name("step_").has_value());
  EXPECT_FALSE(checkpoint_step_from_name("step_12a").has_value());
  EXPECT_FALSE(checkpoint_step_from_name("step_-1").has_value());
  EXPECT_FALSE(checkpoint_step_from_name(".tmp-step_00000100-12").has_value());
}

TEST(ResolveCheckpoint, FindsLatestAndAcceptsEachKindOfPath) {
  TempDir tmp;
  const fs::path run = tmp / "run";
  CheckpointStore store(run / "checkpoints", 5);
  store.save(1, writes("m", "a"));
  const fs::path newest = store.save(2, writes("m", "b"));
  const fs::path older = store.list().front();

  EXPECT_EQ(resolve_checkpoint("latest", store.dir()), newest);
  EXPECT_EQ(resolve_checkpoint(older.string(), tmp / "unused"), older);       // a checkpoint
  EXPECT_EQ(resolve_checkpoint(store.dir().string(), tmp / "unused"), newest);  // a checkpoint dir
  EXPECT_EQ(resolve_checkpoint(run.string(), tmp / "unused"), newest);         // a run dir
}

TEST(ResolveCheckpoint, ExplainsWhatIsWrong) {
  TempDir tmp;
  std::string msg = message_of([&] { resolve_checkpoint("latest", tmp / "none"); });
  EXPECT_NE(msg.find("no checkpoint found in " + (tmp / "none").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("give a checkpoint directory"), std::string::npos) << msg;  // not --resume: eval, export use it

  fs::create_directories(tmp / "empty");
  msg = message_of([&] { resolve_checkpoint("latest", tmp / "empty"); });
  EXPECT_NE(msg.find("no checkpoint found"), std::string::npos) << msg;

  msg = message_of([&] { resolve_checkpoint((tmp / "missing").string(), tmp.path()); });
  EXPECT_NE(msg.find((tmp / "missing").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;

  const fs::path half = tmp.write("half/model.bin", "x").parent_path();
  msg = message_of([&] { resolve_checkpoint(half.string(), tmp.path()); });
  EXPECT_NE(msg.find(half.string() + " is not a complete checkpoint (missing COMPLETE marker)"),
            std::string::npos) << msg;

  const fs::path interrupted = tmp.write("ck/step_00000100/model.bin", "x").parent_path().parent_path();
  msg = message_of([&] { resolve_checkpoint(interrupted.string(), tmp.path()); });
  EXPECT_NE(msg.find("no complete checkpoint in " + interrupted.string()), std::string::npos) << msg;

  const fs::path file = tmp.write("model.bin", "x");
  msg = message_of([&] { resolve_checkpoint(file.string(), tmp.path()); });
  EXPECT_NE(msg.find("is not a directory"), std::string::npos) << msg;

  fs::create_directories(tmp / "run" / "checkpoints");
  msg = message_of([&] { resolve_checkpoint((tmp / "run").string(), tmp.path()); });
  EXPECT_NE(msg.find("no complete checkpoint found in " + (tmp / "run" / "checkpoints").string()),
            std::string::npos) << msg;
}

TEST(VerifyCheckpoint, DetectsTruncatedModifiedAndMissingFiles) {
  TempDir tmp;
  CheckpointStore store(tmp.path(), 1);
  const fs::path p = store.save(1, [](const fs::path& staging) {
    write_file_atomic(staging / "model.safetensors", std::string(1000, 'w'));
    write_file_atomic(staging / "state.bin", "state");
  });
  EXPECT_NO_THROW(verify_checkpoint(p));

  fs::resize_file(p / "model.safetensors", 600);
  std::string msg = message_of([&] { verify_checkpoint(p); });
  EXPECT_NE(msg.find((p / "model.safetensors").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("600 bytes"), std::string::npos) << msg;

  {
    std::string same_size(1000, 'w');
    same_size[500] = 'x';
    std::ofstream(p / "model.safetensors", std::ios::binary | std::ios::trunc) << same_size;
  }
  msg = message_of([&] { verify_checkpoint(p); });
  EXPECT_NE(msg.find("CRC32C"), std::string::npos) << msg;

  std::ofstream(p / "model.safetensors", std::ios::binary | std::ios::trunc) << std::string(1000, 'w');
  EXPECT_NO_THROW(verify_checkpoint(p));
  fs::remove(p / "state.bin");
  msg = message_of([&] { verify_checkpoint(p); });
  EXPECT_NE(msg.find("state.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(VerifyCheckpoint, RejectsMalformedMarkers) {
  TempDir tmp;
  const fs::path p = tmp / "ck";
  fs::create_directories(p);
  EXPECT_NE(message_of([&] { verify_checkpoint(p); }).find("missing COMPLETE marker"), std::string::npos);
  for (const std::string bad :
       {"not json", R"({"format":"other","version":1,"step":1,"files":[]})",
        R"({"format":"hwtrain-checkpoint","version":99,"step":1,"files":[]})",
        R"({"format":"hwtrain-checkpoint","version":1,"files":[]})",
        R"({"format":"hwtrain-checkpoint","version":1,"step":1,"files":[{"path":"a"}]})",
        R"({"format":"hwtrain-checkpoint","version":1,"step":1,"files":[{"path":"../x","size":1,"crc32c":0}]})",
        R"({"format":"hwtrain-checkpoint","version":1,"step":1,"files":[{"path":"/etc/passwd","size":1,"crc32c":0}]})"}) {
    tmp.write("ck/COMPLETE", bad);
    const std::string msg = message_of([&] { verify_checkpoint(p); });
    EXPECT_NE(msg.find((p / "COMPLETE").string() + " is malformed"), std::string::npos) << bad << " -> " << msg;
  }
}

TEST(VerifyCheckpoint, RefusesUnlistedFilesAndLinksInPlaceOfListedOnes) {
  TempDir tmp;
  CheckpointStore store(tmp / "ckpts", 1);
  const fs::path p = store.save(1, writes("tokenizer.model", "model bytes"));
  EXPECT_NO_THROW(verify_checkpoint(p));
  // A file added after the checkpoint was sealed (say, a model file tokenizer.json was edited to
  // name): every file of a checkpoint is listed and checksummed, so it is refused.
  tmp.write("ckpts/step_00000001/other.model", "swapped in");
  std::string msg = message_of([&] { verify_checkpoint(p); });
  EXPECT_NE(msg.find((p / "other.model").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("not listed in COMPLETE"), std::string::npos) << msg;
  fs::remove(p / "other.model");
  // A listed file replaced by a link to identical bytes elsewhere: not a plain file inside the checkpoint.
  tmp.write("elsewhere.model", "model bytes");
  fs::remove(p / "tokenizer.model");
  fs::create_symlink(tmp / "elsewhere.model", p / "tokenizer.model");
  msg = message_of([&] { verify_checkpoint(p); });
  EXPECT_NE(msg.find("not a plain file"), std::string::npos) << msg;
  // verify_checkpoint_file checks one listed file the same way, and refuses an unlisted name.
  EXPECT_NE(message_of([&] { verify_checkpoint_file(p, "tokenizer.model"); }).find("not a plain file"),
            std::string::npos);
  EXPECT_NE(message_of([&] { verify_checkpoint_file(p, "config.toml"); }).find("not listed"), std::string::npos);
}

}  // namespace
}  // namespace hwt
