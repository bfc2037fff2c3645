// End-to-end tests of the hwtrain binary: a tiny training run, resume, generate, eval, and the
// bad inputs of issue 2, each of which must exit non-zero with a one-line error naming the
// file, key or value, and leave existing checkpoints and datasets untouched.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <limits>

#include "hwtrain/core/files.h"
#include "hwtrain/io/checkpoint_store.h"
#include "hwtrain/io/safetensors.h"
#include "support/checkpoint_edit.h"
#include "support/run_metrics.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

struct Result {
  int code;
  std::string output;
};

Result run(const std::string& args, const std::string& cwd) {
  // A small shared setting for speed: no GEMM-dependent flakiness matters for these checks.
  std::string cmd = "cd '" + cwd + "' && OMP_NUM_THREADS=1 " + std::string(HWTRAIN_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string corpus_text() {
  std::string s;
  const char* lines[] = {"The quick brown fox jumps over the lazy dog.\n", "A journey of a thousand miles begins.\n",
                         "To be or not to be, that is the question.\n", "All that glitters is not gold.\n"};
  for (int i = 0; i < 400; ++i) s += lines[i % 4] + std::string("%\n");
  return s;
}

const char* kTiny =
    "--set model.preset=tiny --set train.max_steps=4 --set train.eval_interval=2 --set train.eval_batches=1 "
    "--set train.micro_batch_size=4 --set train.sample_tokens=20 --set train.log_interval=1 "
    "--set data.document_separator=% --set log.tensorboard=false --set log.gpu_log_interval=0 "
    "--set train.time_budget=0";

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir.write("corpus/a.txt", corpus_text());
    dir.write("cache/.keep", "");
  }
  std::string common() const { return std::string(kTiny) + " --set data.cache_dir=" + (dir / "cache").string(); }
  testing::TempDir dir;
};

TEST_F(Cli, TrainResumeGenerateEval) {
  Result r = run("train --data corpus " + common() + " --out run1", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 1 |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("loss "), std::string::npos);
  EXPECT_NE(r.output.find("tokens/s "), std::string::npos);
  EXPECT_NE(r.output.find("val_loss "), std::string::npos);
  EXPECT_NE(r.output.find("checkpoint written to"), std::string::npos);
  EXPECT_NE(r.output.find("[model]"), std::string::npos);  // the resolved config is printed
  EXPECT_TRUE(fs::exists(dir / "run1" / "checkpoints" / "step_00000004" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "run1" / "checkpoints" / "step_00000004" / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(dir / "run1" / "report.html"));
  EXPECT_TRUE(fs::exists(dir / "run1" / "metrics.jsonl"));

  r = run("train --resume latest --out run1 " + common() + " --set train.max_steps=6 --set train.log_interval=4",
          dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  // Every step of the first run (log_interval 1), then of the resumed one its first (readers drop an
  // abandoned run's lines past it) and step 6, its last, which log_interval 4 would skip: reports and
  // sweeps read the final loss.
  EXPECT_EQ(testing::logged_steps(dir / "run1" / "metrics.jsonl"), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  // The new max_steps re-fits the schedule: said once, with both values.
  EXPECT_NE(r.output.find("train.max_steps changes from 4 to 6 on resume"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir / "run1" / "checkpoints" / "step_00000006"));

  r = run("generate run1 --prompt \"The \" -n 10", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("The "), std::string::npos);

  r = run("eval run1", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("val_loss "), std::string::npos) << r.output;

  // The model's shape cannot change on resume.
  r = run("train --resume latest --out run1 " + common() + " --set model.n_layer=3", dir.path());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("model.n_layer cannot change"), std::string::npos) << r.output;
}

void expect_error(const Result& r, const std::string& needle) {
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("hwtrain: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "expected '" << needle << "' in:\n" << r.output;
}

TEST_F(Cli, BadCorpusInputs) {
  expect_error(run("train --data missing_dir " + common(), dir.path()), "missing_dir");
  fs::create_directories(dir / "empty");
  expect_error(run("train --data empty " + common(), dir.path()), "empty");
  dir.write("blank.txt", "");
  expect_error(run("train --data blank.txt " + common(), dir.path()), "blank.txt");
  dir.write("bin/data.bin", std::string("\0\1\2\3", 4));
  expect_error(run("train --data bin " + common(), dir.path()), "bin");
}

TEST_F(Cli, BadTokenFiles) {
  Result r = run("prepare corpus --separator % -o data.hwt", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  std::string bytes = read_file(dir / "data.hwt");
  dir.write("truncated.hwt", bytes.substr(0, bytes.size() - 10));
  expect_error(run("train --data truncated.hwt " + common(), dir.path()), "truncated.hwt");
  std::string flipped = bytes;
  flipped[flipped.size() - 5] ^= 0x01;
  dir.write("flipped.hwt", flipped);
  expect_error(run("train --data flipped.hwt " + common(), dir.path()), "checksum");
  // block_size larger than the data
  expect_error(run("train --data data.hwt " + common() + " --set model.block_size=100000", dir.path()),
               "block_size");
}

TEST_F(Cli, BadConfigs) {
  dir.write("syntax.toml", "[train]\nlr = = 1\n");
  expect_error(run("train --config syntax.toml", dir.path()), "syntax.toml:2");
  dir.write("unknown.toml", "[train]\nmax_step = 5\n");
  expect_error(run("train --config unknown.toml", dir.path()), "train.max_steps");
  expect_error(run("train --set train.micro_batch_size=0", dir.path()), "train.micro_batch_size");
  expect_error(run("train --set model.n_embd=100 --set model.n_head=3", dir.path()), "not divisible");
  expect_error(run("train --set train.lr=fast", dir.path()), "train.lr");
  expect_error(run("train --config nothere.toml", dir.path()), "nothere.toml");
  dir.write("confdir/run.toml", "[train]\nmax_steps = 5\n");
  expect_error(run("plan --config confdir", dir.path()), "confdir: it is a directory");
  // The plan's machine flags: a count without its preset, two machines at once, a count out of range.
  expect_error(run("plan --gpus 8 --nodes 4", dir.path()), "add --preset");
  dir.write("hw.json", "{}");
  expect_error(run("plan --preset h100-80gb --hardware hw.json", dir.path()), "give one");
  // plan refuses the mesh train would refuse: one process cannot hold a tensor-parallel pair, nor 8
  // GPUs a tensor group of 3 (every size set: the mesh is fixed, not searched).
  expect_error(run("plan --set dist.tensor_parallel=2", dir.path()), "does not divide the world size 1");
  expect_error(run("plan --preset h100-80gb --gpus 8 --set dist.tensor_parallel=3 --set dist.pipeline_parallel=1 "
                   "--set dist.pipeline_chunks=1", dir.path()),
               "does not divide the world size 8");
  // Flags out of range are refused by the argument parser, in its own one-line form.
  Result r = run("plan --preset h100-80gb --gpus 100000 --nodes 100000", dir.path());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--gpus: Value 100000 not in range 1 to 64"), std::string::npos) << r.output;
  r = run("generate --top-k -3", dir.path());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--top-k: must be a whole number >= 0, got -3"), std::string::npos) << r.output;
}

TEST_F(Cli, BadResumeAndOutputLeaveCheckpointsIntact) {
  expect_error(run("train --resume nowhere " + common(), dir.path()), "nowhere");
  fs::create_directories(dir / "fake" / "checkpoints" / "step_00000001");
  expect_error(run("train --resume fake " + common(), dir.path()), "fake");

  Result r = run("train --data corpus " + common() + " --out good", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path model = dir / "good" / "checkpoints" / "step_00000004" / "model.safetensors";
  std::string before = read_file(model);
  // Corrupt a copy and resume from it: refused, and the good run is untouched.
  fs::copy(dir / "good", dir / "bad", fs::copy_options::recursive);
  std::string corrupt = read_file(dir / "bad" / "checkpoints" / "step_00000004" / "model.safetensors");
  std::ofstream(dir / "bad" / "checkpoints" / "step_00000004" / "model.safetensors", std::ios::binary)
      << corrupt.substr(0, corrupt.size() / 2);
  expect_error(run("train --resume bad " + common() + " --set train.max_steps=6", dir.path()), "model.safetensors");
  EXPECT_EQ(read_file(model), before);
  // Nothing left to train: refused before anything is written.
  const std::string config = read_file(dir / "good" / "checkpoints" / "step_00000004" / "config.toml");
  expect_error(run("train --resume good --out good " + common() + " --set train.max_steps=3", dir.path()),
               "train.max_steps = 3 is not past step 4");
  EXPECT_EQ(read_file(model), before);
  EXPECT_EQ(read_file(dir / "good" / "checkpoints" / "step_00000004" / "config.toml"), config);

  dir.write("afile", "x");
  expect_error(run("train --data corpus " + common() + " --out afile/sub", dir.path()), "afile");
}

// A copy of run `from` as `to`, with one byte of checkpoint file `file` flipped near its end
// (inside the last tensor, so the file still parses and only the checksum can tell).
void flipped_copy(const testing::TempDir& dir, const std::string& from, const std::string& to,
                  const std::string& file) {
  fs::copy(dir / from, dir / to, fs::copy_options::recursive);
  const fs::path path = dir / to / "checkpoints" / "step_00000004" / file;
  std::string bytes = read_file(path);
  bytes[bytes.size() - 3] ^= 0x10;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_F(Cli, ResumeVerifiesTheChecksumsEvalAndGenerateVerify) {
  Result r = run("train --data corpus " + common() + " --out good", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  for (const std::string& file : {std::string("model.safetensors"), std::string("optimizer.safetensors")}) {
    const std::string copy = "bad-" + file.substr(0, file.find('.'));
    flipped_copy(dir, "good", copy, file);
    r = run("train --resume " + copy + " " + common() + " --set train.max_steps=6", dir.path());
    expect_error(r, (fs::path(copy) / "checkpoints" / "step_00000004" / file).string());
    expect_error(r, "CRC32C");
    EXPECT_FALSE(fs::exists(dir / copy / "checkpoints" / "step_00000006")) << r.output;
  }
  expect_error(run("eval bad-model", dir.path()), "CRC32C");  // the same check, the same words
}

TEST_F(Cli, OutDirHoldingARunIsRefusedUnlessResumedOrOverwritten) {
  // A config.toml alone may be the user's own: refused. A run that failed before its first step
  // (on its data, say) left its start-up files, plan.json among them: its retry into the same
  // directory is not refused as "a run", and rewrites them.
  dir.write("run1/config.toml", "# a failed start\n");
  expect_error(run("train --data corpus " + common() + " --out run1", dir.path()), "--out run1 already holds a run");
  dir.write("run1/plan.json", "{}");
  Result r = run("train --data corpus " + common() + " --out run1", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  dir.write("run1/notes.txt", "mine");
  const std::string config = read_file(dir / "run1" / "config.toml");
  EXPECT_NE(config, "# a failed start\n");
  const std::string metrics = read_file(dir / "run1" / "metrics.jsonl");
  // Another run into the same directory would mix metrics, configs and checkpoints: refused.
  r = run("train --data corpus " + common() + " --set model.n_layer=1 --out run1", dir.path());
  expect_error(r, "--out run1 already holds a run");
  expect_error(r, "--overwrite");
  EXPECT_EQ(read_file(dir / "run1" / "config.toml"), config);
  EXPECT_EQ(read_file(dir / "run1" / "metrics.jsonl"), metrics);
  // --overwrite with a config error: the old run is kept (it is cleared only once the new one checks out).
  expect_error(run("train --data corpus " + common() + " --set train.lr=fast --out run1 --overwrite", dir.path()),
               "train.lr");
  EXPECT_TRUE(fs::exists(dir / "run1" / "checkpoints" / "step_00000004"));
  // --overwrite may not delete the checkpoint it resumes.
  expect_error(run("train --resume run1 " + common() + " --out run1 --overwrite", dir.path()), "--overwrite");
  // --overwrite replaces the run: no old checkpoint or metric line survives; other files stay.
  r = run("train --data corpus " + common() + " --set train.max_steps=2 --out run1 --overwrite", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(dir / "run1" / "checkpoints" / "step_00000004"));
  EXPECT_TRUE(fs::exists(dir / "run1" / "checkpoints" / "step_00000002"));
  EXPECT_EQ(read_file(dir / "run1" / "metrics.jsonl").find("\"step\":4"), std::string::npos);
  EXPECT_NE(read_file(dir / "run1" / "config.toml").find("max_steps = 2"), std::string::npos);
  EXPECT_EQ(read_file(dir / "run1" / "notes.txt"), "mine");
}

// Rewrites run1's last checkpoint with every weight multiplied by `factor` (checksums resealed).
void scale_weights(const testing::TempDir& dir, float factor) {
  const fs::path ckpt = dir / "run1" / "checkpoints" / "step_00000004";
  NamedTensors weights = load_safetensors(ckpt / "model.safetensors").tensors;
  for (auto& [name, t] : weights) t = t * factor;
  save_safetensors(dir / "scaled.safetensors", weights, {{"format", "hwtrain-gpt"}});
  testing::reseal_checkpoint(ckpt, {{"model.safetensors", read_file(dir / "scaled.safetensors")}});
}

TEST_F(Cli, EvalAndGenerateRefuseNonFiniteWeightsAndLosses) {
  Result r = run("train --data corpus " + common() + " --out run1", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string ckpt = (fs::path("run1") / "checkpoints" / "step_00000004").string();
  scale_weights(dir, std::numeric_limits<float>::quiet_NaN());
  r = run("eval run1 --data corpus", dir.path());
  expect_error(r, "checkpoint " + ckpt);
  expect_error(r, "NaN or infinite");
  expect_error(run("generate run1 -n 5", dir.path()), "NaN or infinite");
  expect_error(run("export run1 -o exported", dir.path()), "NaN or infinite");
  // Finite weights whose activations overflow: the loss itself is not finite.
  r = run("train --data corpus " + common() + " --out run1 --overwrite", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  scale_weights(dir, 1e30f);
  r = run("eval run1 --data corpus", dir.path());
  expect_error(r, "checkpoint " + ckpt);
  expect_error(r, "non-finite validation loss");
}

// A checkpoint that lacks a parameter (sealed so, as another configuration would write it) is not
// a model: eval names the tensor instead of running random weights; and export takes hwtrain's own
// models only, not a library model's checkpoint.
TEST_F(Cli, EvalRefusesAMissingParameterAndExportALibraryModel) {
  Result r = run("train --data corpus " + common() + " --out run1", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path ckpt = dir / "run1" / "checkpoints" / "step_00000004";
  const NamedTensors weights = load_safetensors(ckpt / "model.safetensors").tensors;
  NamedTensors fewer(weights.begin(), weights.end() - 1);
  save_safetensors(dir / "fewer.safetensors", fewer, {{"format", "hwtrain-gpt"}});
  testing::reseal_checkpoint(ckpt, {{"model.safetensors", read_file(dir / "fewer.safetensors")}});
  expect_error(run("eval run1 --data corpus", dir.path()), "has no tensor '" + weights.back().first + "'");
  save_safetensors(dir / "module.safetensors", weights, {{"format", "hwtrain-module"}});
  testing::reseal_checkpoint(ckpt, {{"model.safetensors", read_file(dir / "module.safetensors")}});
  expect_error(run("export run1 -o exported", dir.path()), "holds a library model");
  EXPECT_FALSE(fs::exists(dir / "exported"));
}

// A diverged fp32 run stops after K non-finite losses in a row, naming the key, and saves no
// checkpoint after a non-finite loss: the one from before is kept (keep_last = 2 would have rotated
// it out), its weights finite (the step's update at lr 1e6 has blown them up, so its validation
// loss is not: eval says so, not that the weights are NaN).
TEST_F(Cli, ADivergedRunStopsAndKeepsItsFiniteCheckpoints) {
  Result r = run("train --data corpus " + common() +
                     " --set train.max_steps=8 --set train.lr=1e6 --set train.warmup_steps=0"
                     " --set checkpoint.interval=1 --set checkpoint.keep_last=2"
                     " --set optimization.mixed_precision_dtype=fp32 --out wild",
                 dir.path());
  expect_error(r, "training diverged: 3 consecutive steps had a non-finite loss in fp32");
  expect_error(r, "optimization.nonfinite_fallback_steps = 3");
  const auto kept = CheckpointStore(dir / "wild" / "checkpoints", 2).list();
  ASSERT_FALSE(kept.empty()) << r.output;
  r = run("eval " + kept.back().string() + " --data corpus", dir.path());
  EXPECT_EQ(r.output.find("holds NaN or infinite values"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("loaded " + kept.back().string()), std::string::npos) << r.output;
}

// The pid of `hwtrain args` started in `cwd` (output to cwd/log), not waited for.
pid_t start(const std::string& args, const fs::path& cwd) {
  const std::string cmd =
      "cd '" + cwd.string() + "' && OMP_NUM_THREADS=1 exec " + HWTRAIN_BINARY + " " + args + " > log 2>&1";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits (up to `seconds`) until a checkpoint is complete in `ckpts` and the next one's staging
// directory appears, then SIGKILLs `pid` at once: a kill -9 in the middle of a checkpoint write.
bool kill_during_next_checkpoint_write(pid_t pid, const fs::path& ckpts, int seconds) {
  const int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0 || ::inotify_add_watch(fd, ckpts.c_str(), IN_CREATE) < 0) return false;
  bool killed = false;
  alignas(inotify_event) char buf[4096];
  for (int waited_ms = 0; !killed && waited_ms < seconds * 1000;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) == 0) {
      waited_ms += 50;
      continue;
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    for (ssize_t off = 0; off < n && !killed;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
      const std::string name = e->len ? e->name : "";
      if (name.rfind(".tmp-step_", 0) == 0 && CheckpointStore(ckpts, 1).latest()) killed = ::kill(pid, SIGKILL) == 0;
      off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  ::close(fd);
  return killed;
}

TEST_F(Cli, KillDashNineDuringACheckpointWriteKeepsThePreviousOneAndResumeContinues) {
  // Checkpoints every step into run/ckpts (made beforehand, so that it can be watched).
  const fs::path ckpts = dir / "run" / "ckpts";
  fs::create_directories(ckpts);
  const std::string args = common() + " --set checkpoint.interval=1 --set checkpoint.keep_last=2" +
                           " --set checkpoint.dir=" + ckpts.string() + " --out run";
  const pid_t pid = start("train --data corpus " + args + " --set train.max_steps=1000", dir.path());
  const bool killed = kill_during_next_checkpoint_write(pid, ckpts, 120);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(killed) << read_file(dir / "run" / "log");
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // The newest complete checkpoint is intact; the killed write left at most its hidden staging dir.
  const auto latest = CheckpointStore(ckpts, 1).latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_NO_THROW(verify_checkpoint(*latest));
  const int64_t step = checkpoint_step_from_name(latest->filename().string()).value();
  // --resume continues from it (and clears the dead writer's staging directory).
  const std::string steps = " --set train.max_steps=" + std::to_string(step + 2);
  Result r = run("train --resume " + ckpts.string() + " " + args + steps, dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + latest->string() + " at step " + std::to_string(step)), std::string::npos)
      << r.output;
  char resumed_name[32];
  std::snprintf(resumed_name, sizeof resumed_name, "step_%08lld", static_cast<long long>(step + 2));
  EXPECT_EQ(CheckpointStore(ckpts, 1).latest()->filename().string(), resumed_name);
  for (const auto& e : fs::directory_iterator(ckpts)) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << "leftover " << e.path();
  }
}

TEST_F(Cli, ProfilePrintsPhasesAndTopOperators) {
  Result r = run("profile --data corpus " + common() + " --steps 5 --top 5 --out prof", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir / "prof" / "trace.json"));
  EXPECT_NE(r.output.find("forward"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("aten::"), std::string::npos) << r.output;  // operator-level events
  // The profile of an existing run directory, and one without a profile.
  r = run("profile prof --top 3", dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("aten::"), std::string::npos) << r.output;
  fs::create_directories(dir / "noprof");
  expect_error(run("profile noprof", dir.path()), "--profile-steps");
}

TEST_F(Cli, HelpForEverySubcommand) {
  for (const char* sub : {"train", "prepare", "tokenizer", "generate", "eval", "doctor", "plan", "report", "profile",
                          "launch", "export"}) {
    Result r = run(std::string(sub) + " --help", dir.path());
    EXPECT_EQ(r.code, 0) << sub << ": " << r.output;
  }
}

}  // namespace
}  // namespace hwt
