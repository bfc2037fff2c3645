#include "hwtrain/sweep/study_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <utility>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/base_config.h"
#include "hwtrain/sweep/process_identity.h"

namespace hwt::sweep {

namespace {

constexpr std::int64_t kStudyApplicationId = 0x68777473;  // "hwts" in the SQLite header: an hwtrain study
constexpr std::int64_t kStudySchemaVersion = 2;  // 2: meta.base_config

// value in intermediate is NULL for a reported NaN (SQLite stores NaN as NULL); pid and pid_start
// are the claiming process's, on the machine named by machine_key, for the liveness check.
const char* const kStudySchemaSql = R"sql(
CREATE TABLE meta (
  id INTEGER PRIMARY KEY CHECK (id = 0),
  schema_version INTEGER NOT NULL,
  name TEXT NOT NULL,
  space_fingerprint TEXT NOT NULL,
  direction TEXT NOT NULL,
  objective TEXT NOT NULL,
  created_unix REAL NOT NULL,
  base_config TEXT NOT NULL DEFAULT ''
);
CREATE TABLE trials (
  number INTEGER PRIMARY KEY,
  state TEXT NOT NULL,
  params_json TEXT NOT NULL,
  value REAL,
  reason TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  worker TEXT NOT NULL,
  owner_token TEXT NOT NULL,
  machine_key TEXT NOT NULL,
  pid INTEGER NOT NULL,
  pid_start INTEGER NOT NULL,
  heartbeat_unix REAL NOT NULL,
  started_unix REAL NOT NULL,
  finished_unix REAL
);
CREATE INDEX trials_by_state ON trials (state);
CREATE TABLE intermediate (
  number INTEGER NOT NULL REFERENCES trials (number),
  step INTEGER NOT NULL,
  value REAL,
  PRIMARY KEY (number, step)
) WITHOUT ROWID;
)sql";

constexpr std::int64_t kAllTrials = std::numeric_limits<std::int64_t>::max();

// Trials numbered first..last with their intermediate values, ordered by number.
std::vector<Trial> read_study_trials(const SqliteDb& db, std::int64_t first, std::int64_t last) {
  std::vector<Trial> out;
  std::map<std::int64_t, std::size_t> index;
  SqlStatement q(db,
                 "SELECT number, state, params_json, value, reason, attempts, started_unix, finished_unix FROM trials "
                 "WHERE number BETWEEN ?1 AND ?2 ORDER BY number");
  q.bind_int(1, first).bind_int(2, last);
  while (q.step()) {
    Trial t;
    t.number = q.int_at(0);
    const std::string where = db.path() + " trial " + std::to_string(t.number);
    const auto state = parse_trial_state(q.text_at(1));
    if (!state) {
      throw IoError(where + " has state \"" + q.text_at(1) +
                    "\"; expected running, complete, pruned, failed or interrupted (the file is damaged)");
    }
    t.state = *state;
    t.params = params_from_json(q.text_at(2), where);
    if (!q.is_null(3)) t.value = q.real_at(3);
    t.reason = q.text_at(4);
    t.attempts = static_cast<int>(q.int_at(5));
    t.started_unix = q.real_at(6);
    if (!q.is_null(7)) t.finished_unix = q.real_at(7);
    index[t.number] = out.size();
    out.push_back(std::move(t));
  }
  SqlStatement iq(db,
                  "SELECT number, step, value FROM intermediate WHERE number BETWEEN ?1 AND ?2 "
                  "ORDER BY number, step");
  iq.bind_int(1, first).bind_int(2, last);
  while (iq.step()) {
    const auto it = index.find(iq.int_at(0));
    if (it == index.end()) continue;
    out[it->second].intermediate[iq.int_at(1)] =
        iq.is_null(2) ? std::numeric_limits<double>::quiet_NaN() : iq.real_at(2);
  }
  return out;
}

Trial read_study_trial(const SqliteDb& db, std::int64_t number) {
  auto found = read_study_trials(db, number, number);
  if (found.size() != 1) throw IoError(db.path() + ": trial " + std::to_string(number) + " vanished");
  return std::move(found.front());
}

// "UPDATE trials SET <set_sql>" for the trial ?1 while this store (token ?2) holds it.
std::string update_held_trial_sql(const std::string& set_sql) {
  return "UPDATE trials SET " + set_sql + " WHERE number = ?1 AND owner_token = ?2 AND state = 'running'";
}

std::string random_owner_token() {
  std::random_device rd;
  std::ostringstream s;
  s << std::hex << std::setfill('0');
  for (int i = 0; i < 4; ++i) s << std::setw(8) << rd();
  return s.str();
}

std::string whole_seconds(double s) { return std::to_string(std::llround(s)); }

}  // namespace

StudyStore::StudyStore(SqliteDb db, StudyInfo info, StudyStoreOptions options)
    : db_(std::move(db)), info_(std::move(info)), options_(std::move(options)) {
  worker_ = options_.worker.empty() ? default_worker_id() : options_.worker;
  owner_token_ = random_owner_token();
  machine_key_ = this_machine_key();
  pid_ = ::getpid();
  pid_start_ = process_start_ticks(pid_);
}

StudyStore StudyStore::open(const std::string& path, const StudyInfo& info, StudyStoreOptions options) {
  if (info.direction != "min" && info.direction != "max") {
    throw ConfigError("study direction is \"" + info.direction + "\"; it must be \"min\" or \"max\"");
  }
  if (!(options.heartbeat_timeout_s > 0.0)) {
    throw ConfigError("heartbeat_timeout_s is " + std::to_string(options.heartbeat_timeout_s) +
                      "; it must be positive (600 s is the default)");
  }
  if (!(options.busy_timeout_s >= 0.0)) {
    throw ConfigError("busy_timeout_s is " + std::to_string(options.busy_timeout_s) + "; it must be 0 or more");
  }
  const double busy_timeout_s = options.busy_timeout_s;
  StudyStore store(SqliteDb::open(path, busy_timeout_s), info, std::move(options));
  store.create_or_check_schema();
  return store;
}

void StudyStore::create_or_check_schema() {
  const std::string& path = db_.path();
  std::string mode;
  try {  // the first read of the file: where a file that is not SQLite shows itself
    SqlStatement journal(db_, "PRAGMA journal_mode = DELETE");
    if (journal.step()) mode = journal.text_at(0);
  } catch (const IoError&) {
    const int code = db_.last_error_code() & 0xff;
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
      throw IoError(path + " is not an hwtrain study: it is not a SQLite database (" +
                    sqlite3_errmsg(db_.handle()) + "); pass a new file name to start a study");
    }
    throw;
  }
  if (mode != "delete") {
    throw IoError(path + ": cannot switch the journal to DELETE mode (it stays \"" + mode +
                  "\"); close other programs that have the study open in WAL mode");
  }
  db_.exec("PRAGMA synchronous = FULL");

  SqlTransaction txn(db_, SqlTxnKind::kWrite);  // a write lock, so two processes cannot both create
  const auto pragma_int = [&](const char* sql) {
    SqlStatement q(db_, sql);
    return q.step() ? q.int_at(0) : std::int64_t{0};
  };
  const std::int64_t app_id = pragma_int("PRAGMA application_id");
  const std::int64_t version = pragma_int("PRAGMA user_version");
  const std::int64_t num_objects = pragma_int("SELECT count(*) FROM sqlite_master");
  if (app_id == 0 && num_objects == 0) {
    db_.exec(kStudySchemaSql);
    db_.exec("PRAGMA application_id = " + std::to_string(kStudyApplicationId));
    db_.exec("PRAGMA user_version = " + std::to_string(kStudySchemaVersion));
    SqlStatement meta(db_,
                      "INSERT INTO meta (id, schema_version, name, space_fingerprint, direction, objective, "
                      "created_unix, base_config) VALUES (0, ?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    meta.bind_int(1, kStudySchemaVersion).bind_text(2, info_.name).bind_text(3, info_.space_fingerprint);
    meta.bind_text(4, info_.direction).bind_text(5, info_.objective).bind_real(6, now());
    meta.bind_text(7, info_.base_config).run();
    txn.commit();
    return;
  }
  if (app_id != kStudyApplicationId) {
    throw IoError(path + " is a SQLite database but not an hwtrain study (application_id " + std::to_string(app_id) +
                  ", " + std::to_string(num_objects) + " schema objects); pass a new file name to start a study");
  }
  if (version == 1) {  // written before base configs were recorded: this sweep's is taken as the study's
    db_.exec("ALTER TABLE meta ADD COLUMN base_config TEXT NOT NULL DEFAULT ''");
    SqlStatement adopt(db_, "UPDATE meta SET base_config = ?1, schema_version = 2 WHERE id = 0");
    adopt.bind_text(1, info_.base_config).run();
    db_.exec("PRAGMA user_version = " + std::to_string(kStudySchemaVersion));
  } else if (version != kStudySchemaVersion) {
    throw IoError(path + " is an hwtrain study of schema version " + std::to_string(version) +
                  ", but this hwtrain reads version " + std::to_string(kStudySchemaVersion) +
                  "; use the hwtrain that created it, or a new study file");
  }
  SqlStatement meta(db_, "SELECT name, space_fingerprint, direction, objective, base_config FROM meta WHERE id = 0");
  if (!meta.step()) throw IoError(path + " is an hwtrain study without its meta row (damaged); use a new study file");
  const auto differs = [&](int column, const std::string& now_value, const std::string& what) {
    const std::string in_file = meta.text_at(column);
    if (in_file == now_value) return;
    throw ConfigError(path + " was created for a different " + what + " (\"" + in_file + "\" in the file, \"" +
                      now_value + "\" now); use a new study file or the same " + what);
  };
  differs(0, info_.name, "study name");
  differs(1, info_.space_fingerprint, "search space");
  differs(2, info_.direction, "direction");
  differs(3, info_.objective, "objective");
  if (const std::string change = first_base_difference(meta.text_at(4), info_.base_config); !change.empty()) {
    throw ConfigError(path + " was created with another base config (" + change + "): its trials would not compare "
                      "with new ones; restore sweep.base_config's file, or use a new study file");
  }
  txn.commit();
}

double StudyStore::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<Trial> StudyStore::trials() const {
  SqlTransaction txn(db_, SqlTxnKind::kRead);  // one snapshot for trials and intermediate values
  auto out = read_study_trials(db_, 0, kAllTrials);
  txn.commit();
  return out;
}

void StudyStore::recover_stale_trials(double now) {
  std::vector<std::pair<std::int64_t, std::string>> stale;  // number, reason
  {
    SqlStatement q(db_,
                   "SELECT number, worker, owner_token, machine_key, pid, pid_start, heartbeat_unix "
                   "FROM trials WHERE state = 'running'");
    while (q.step()) {
      if (q.text_at(2) == owner_token_) continue;  // held by this store: this process is alive
      const std::string worker = q.text_at(1);
      const double silent_s = now - q.real_at(6);
      if (q.text_at(3) == machine_key_ && !local_process_alive(q.int_at(4), q.int_at(5))) {
        stale.emplace_back(q.int_at(0), "sweep process " + worker + " died mid-trial");
      } else if (silent_s > options_.heartbeat_timeout_s) {
        stale.emplace_back(q.int_at(0), "sweep process " + worker + " sent no heartbeat for " +
                                            whole_seconds(silent_s) + " s (timeout " +
                                            whole_seconds(options_.heartbeat_timeout_s) + " s)");
      }
    }
  }
  for (const auto& [number, reason] : stale) {
    SqlStatement u(db_, "UPDATE trials SET state = 'interrupted', reason = ?2, finished_unix = ?3 WHERE number = ?1");
    u.bind_int(1, number).bind_text(2, reason).bind_real(3, now).run();
  }
  SqlStatement twice(db_,
                     "UPDATE trials SET state = 'failed', reason = 'interrupted twice; last time: ' || reason "
                     "WHERE state = 'interrupted' AND attempts >= 2");
  twice.run();
}

std::optional<Trial> StudyStore::retry_interrupted(double now) {
  std::int64_t number = 0;
  {
    SqlStatement q(db_, "SELECT number FROM trials WHERE state = 'interrupted' AND attempts < 2 ORDER BY number LIMIT 1");
    if (!q.step()) return std::nullopt;
    number = q.int_at(0);
  }
  // The retry runs the trial from the start: values the first attempt reported would mix two runs.
  SqlStatement u(db_,
                 "UPDATE trials SET state = 'running', attempts = attempts + 1, value = NULL, finished_unix = NULL, "
                 "worker = ?2, owner_token = ?3, machine_key = ?4, pid = ?5, pid_start = ?6, heartbeat_unix = ?7, "
                 "started_unix = ?7 WHERE number = ?1");
  u.bind_int(1, number).bind_text(2, worker_).bind_text(3, owner_token_).bind_text(4, machine_key_);
  u.bind_int(5, pid_).bind_int(6, pid_start_).bind_real(7, now).run();
  SqlStatement d(db_, "DELETE FROM intermediate WHERE number = ?1");
  d.bind_int(1, number).run();
  return read_study_trial(db_, number);
}

Trial StudyStore::insert_trial(const Params& params, double now) {
  const std::string params_json = params_to_json(params);
  std::int64_t number = 0;
  {
    SqlStatement next(db_, "SELECT COALESCE(MAX(number) + 1, 0) FROM trials");
    if (next.step()) number = next.int_at(0);
  }
  SqlStatement ins(db_,
                   "INSERT INTO trials (number, state, params_json, value, reason, attempts, worker, owner_token, "
                   "machine_key, pid, pid_start, heartbeat_unix, started_unix, finished_unix) "
                   "VALUES (?1, 'running', ?2, NULL, '', 1, ?3, ?4, ?5, ?6, ?7, ?8, ?8, NULL)");
  ins.bind_int(1, number).bind_text(2, params_json).bind_text(3, worker_).bind_text(4, owner_token_);
  ins.bind_text(5, machine_key_).bind_int(6, pid_).bind_int(7, pid_start_).bind_real(8, now).run();
  return read_study_trial(db_, number);
}

std::optional<Trial> StudyStore::claim(const SampleParams& sample, int max_trials) {
  if (max_trials < 1) {
    throw ConfigError("max_trials is " + std::to_string(max_trials) + "; a study needs at least 1 trial");
  }
  SqlTransaction txn(db_, SqlTxnKind::kWrite);
  const double t = now();
  recover_stale_trials(t);
  std::optional<Trial> trial = retry_interrupted(t);
  if (!trial) {
    std::int64_t num_trials = 0;
    {
      SqlStatement count(db_, "SELECT count(*) FROM trials");
      if (count.step()) num_trials = count.int_at(0);
    }
    if (num_trials < max_trials) trial = insert_trial(sample(read_study_trials(db_, 0, kAllTrials)), t);
  }
  txn.commit();
  return trial;
}

bool StudyStore::heartbeat(std::int64_t number) {
  SqlTransaction txn(db_, SqlTxnKind::kWrite);
  SqlStatement u(db_, update_held_trial_sql("heartbeat_unix = ?3"));
  u.bind_int(1, number).bind_text(2, owner_token_).bind_real(3, now()).run();
  const bool held = db_.changes() == 1;
  txn.commit();
  return held;
}

bool StudyStore::report(std::int64_t number, std::int64_t step, double value) {
  SqlTransaction txn(db_, SqlTxnKind::kWrite);
  SqlStatement u(db_, update_held_trial_sql("heartbeat_unix = ?3"));
  u.bind_int(1, number).bind_text(2, owner_token_).bind_real(3, now()).run();
  if (db_.changes() != 1) return false;  // rolled back: nothing written
  SqlStatement ins(db_,
                   "INSERT INTO intermediate (number, step, value) VALUES (?1, ?2, ?3) "
                   "ON CONFLICT (number, step) DO UPDATE SET value = excluded.value");
  ins.bind_int(1, number).bind_int(2, step);
  if (std::isnan(value)) {
    ins.bind_null(3);
  } else {
    ins.bind_real(3, value);
  }
  ins.run();
  txn.commit();
  return true;
}

bool StudyStore::finish(std::int64_t number, TrialState state, std::optional<double> value,
                        const std::string& reason) {
  if (state == TrialState::kRunning) {
    throw ConfigError("finish(trial " + std::to_string(number) +
                      ") needs an end state (complete, pruned, failed or interrupted), not running");
  }
  SqlTransaction txn(db_, SqlTxnKind::kWrite);
  SqlStatement u(db_, update_held_trial_sql(
                          "state = ?3, value = ?4, reason = ?5, finished_unix = ?6, heartbeat_unix = ?6"));
  u.bind_int(1, number).bind_text(2, owner_token_).bind_text(3, trial_state_name(state));
  if (value && !std::isnan(*value)) {
    u.bind_real(4, *value);
  } else {
    u.bind_null(4);
  }
  u.bind_text(5, reason).bind_real(6, now()).run();
  const bool held = db_.changes() == 1;
  txn.commit();
  return held;
}

bool StudyStore::release(std::int64_t number, const std::string& reason) {
  SqlTransaction txn(db_, SqlTxnKind::kWrite);
  SqlStatement u(db_, update_held_trial_sql("state = 'interrupted', attempts = attempts - 1, value = NULL, "
                                            "reason = ?3, finished_unix = ?4, heartbeat_unix = ?4"));
  u.bind_int(1, number).bind_text(2, owner_token_).bind_text(3, reason).bind_real(4, now()).run();
  const bool held = db_.changes() == 1;
  txn.commit();
  return held;
}

std::string default_worker_id() { return this_host_name() + ":" + std::to_string(::getpid()); }

}  // namespace hwt::sweep
