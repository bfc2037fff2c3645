// The study store: a hyperparameter search's trials in one SQLite file (parameters, state,
// intermediate values, result), so that a killed sweep resumes where it stopped, with nothing lost
// or repeated, and several sweep processes (on one machine, on machines sharing a file system, or
// Slurm tasks) share one study. It records trials; it does not sample, prune or run them.
//
// Concurrency: every write is one BEGIN IMMEDIATE transaction, so claims from several processes
// are serialized by SQLite's file lock, and a claim reads the history and adds its trial atomically.
// The journal is DELETE, not WAL: WAL needs shared memory that network file systems (NFS, Lustre,
// GPFS) cannot give two machines. SQLite's locking there is only as good as the file system's POSIX
// (fcntl) locks, so the study file must live on one whose locks work. synchronous=FULL: a
// committed trial survives a crash of the machine, not only of the process.
//
// Stale trials: a claim first marks INTERRUPTED every RUNNING trial whose sweep process is gone:
// on this machine (same host name, pid namespace and boot) when its pid no longer exists or now
// belongs to a later process; anywhere, when its heartbeat is older than heartbeat_timeout_s (the
// clocks of machines sharing a study must agree to well within that). An interrupted trial is
// retried once, with the same parameters, by the next claim; interrupted a second time, it
// becomes FAILED. A trial is written only by the store that claimed it (an owner token per open
// store), so a process that was taken for dead and wakes up cannot overwrite its successor.
//
// Objective values are stored as given: minimized (see trial.h). Not offered: deleting trials,
// renaming studies, migrating older schema versions, sharing one StudyStore across fork().
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/sweep/sqlite_db.h"
#include "hwtrain/sweep/trial.h"
#include "hwtrain/sweep/trial_codec.h"

namespace hwt::sweep {

// What a study is for; a study file is reopened only by a sweep with the same five fields.
struct StudyInfo {
  std::string name;               // the study's name, e.g. the sweep file's stem
  std::string space_fingerprint;  // a hash of the search space: trials of another space do not mix
  std::string direction;          // "min" or "max": how the objective was turned into a minimized value
  std::string objective;          // the metric optimized, e.g. "val_loss"
  // The trials' train config (sweep/base_config.h's recorded form; "" = none): trials of another base
  // would not compare. A study written before it was recorded takes the first one it is opened with.
  std::string base_config;
};

struct StudyStoreOptions {
  // Names this sweep process in the trials table and in messages; empty: default_worker_id().
  std::string worker;
  // A RUNNING trial whose heartbeat is older than this is taken for dead, wherever its process runs.
  // 10 minutes: far longer than a heartbeat interval (seconds) plus a busy wait or clock skew, far
  // shorter than a trial.
  double heartbeat_timeout_s = 600.0;
  // How long a transaction waits for another process's; 60 s: a claim holds the lock while the
  // sampler runs, and a network file system can be slow.
  double busy_timeout_s = 60.0;
  // Unix time in seconds; empty: the system clock. Tests inject one to age heartbeats.
  std::function<double()> clock;
};

// Proposes the parameters of a new trial from all trials so far (ordered by number).
using SampleParams = std::function<Params(const std::vector<Trial>& history)>;

class StudyStore {
 public:
  // Opens the study at `path`, creating the file and its schema if there is none. Throws ConfigError
  // when `info` is invalid or differs from the study's, IoError when the file is not an hwtrain
  // study (not SQLite, another schema, another schema version) or cannot be read and written.
  static StudyStore open(const std::string& path, const StudyInfo& info, StudyStoreOptions options = {});

  StudyStore(StudyStore&&) = default;
  StudyStore& operator=(StudyStore&&) = default;
  StudyStore(const StudyStore&) = delete;
  StudyStore& operator=(const StudyStore&) = delete;

  // All trials with their intermediate values, ordered by number.
  std::vector<Trial> trials() const;

  // In one transaction: marks stale trials INTERRUPTED (and twice-interrupted ones FAILED); then
  // takes back the oldest interrupted trial (attempts 2, same parameters) if there is one; else, if
  // fewer than `max_trials` trials were ever created (every state counts, a retry creates none),
  // creates trial max+1 (0 for the first) with sample(history). Returns the RUNNING trial this
  // store now holds (a retry keeps its interruption's reason until finish(), and loses the first
  // attempt's intermediate values: it runs from the start), or nullopt when the study has all its
  // trials; trials that go stale after a process's last claim are retried by the next run. If
  // `sample` throws, nothing is written and the exception propagates.
  std::optional<Trial> claim(const SampleParams& sample, int max_trials);

  // Each writes in one transaction only while this store holds trial `number` (RUNNING, claimed
  // here); otherwise writes nothing and returns false: the trial was finished, or taken over by
  // another process after this one was taken for dead, and the caller should stop it.
  [[nodiscard]] bool heartbeat(std::int64_t number);
  // Records (or replaces) the minimized value at `step`; also counts as a heartbeat. A NaN is kept.
  [[nodiscard]] bool report(std::int64_t number, std::int64_t step, double value);
  // Ends the trial in `state` (not kRunning) with its minimized value (a NaN is stored as none).
  [[nodiscard]] bool finish(std::int64_t number, TrialState state, std::optional<double> value,
                            const std::string& reason);
  // Gives the trial back unrun (its process could not start: not the trial's fault): INTERRUPTED
  // without counting the attempt, so the next claim runs it with its one retry still to come.
  [[nodiscard]] bool release(std::int64_t number, const std::string& reason);

  const std::string& path() const { return db_.path(); }
  const std::string& worker() const { return worker_; }
  const StudyInfo& info() const { return info_; }

 private:
  StudyStore(SqliteDb db, StudyInfo info, StudyStoreOptions options);
  double now() const;
  void create_or_check_schema();
  void recover_stale_trials(double now);
  std::optional<Trial> retry_interrupted(double now);
  Trial insert_trial(const Params& params, double now);

  SqliteDb db_;
  StudyInfo info_;
  StudyStoreOptions options_;
  std::string worker_;
  std::string owner_token_;  // random per open store: who may write a RUNNING trial
  std::string machine_key_;  // host name, pid namespace and boot id: where pids can be checked
  std::int64_t pid_ = 0;
  std::int64_t pid_start_ = 0;  // this process's start time in clock ticks since boot (0: unknown)
};

// "host:pid" of this process.
std::string default_worker_id();

}  // namespace hwt::sweep
