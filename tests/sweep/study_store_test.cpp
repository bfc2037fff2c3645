#include "hwtrain/sweep/study_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <set>

#include "hwtrain/core/error.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace hwt::sweep {
namespace {

using hwt::testing::error_of;
using hwt::testing::TempDir;

StudyInfo store_test_info() { return {"demo", "space-fp-1", "min", "val_loss", ""}; }

std::uint64_t store_test_bits(double x) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

// A sampler that proposes {"lr": <real>, "layers": <int>, "dtype": <text>} and counts its calls.
SampleParams store_test_sampler(std::vector<std::size_t>* history_sizes = nullptr) {
  return [history_sizes](const std::vector<Trial>& history) {
    if (history_sizes != nullptr) history_sizes->push_back(history.size());
    const auto n = static_cast<std::int64_t>(history.size());
    return Params{{"lr", 0.1 / static_cast<double>(n + 3)}, {"layers", n + 2}, {"dtype", std::string("bf16")}};
  };
}

bool trial_params_equal_bitwise(const Params& a, const Params& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [key, value] : a) {
    const auto it = b.find(key);
    if (it == b.end() || it->second.index() != value.index()) return false;
    if (const auto* real = std::get_if<double>(&value)) {
      if (store_test_bits(*real) != store_test_bits(std::get<double>(it->second))) return false;
    } else if (value != it->second) {
      return false;
    }
  }
  return true;
}

TEST(StudyStore, CreateAndReopenKeepEveryFieldBitExact) {
  TempDir dir;
  const std::string path = (dir / "sweep.db").string();
  const Params tricky{{"lr", 0.1},
                      {"tiny", std::numeric_limits<double>::denorm_min()},
                      {"neg_zero", -0.0},
                      {"big", std::numeric_limits<double>::max()},
                      {"next", std::nextafter(1.0, 2.0)},
                      {"int_min", std::numeric_limits<std::int64_t>::min()},
                      {"int_max", std::numeric_limits<std::int64_t>::max()},
                      {"three", std::int64_t{3}},
                      {"choice", std::string("0.1")}};
  const double objective = 1.0 / 3.0;
  {
    auto store = StudyStore::open(path, store_test_info());
    auto t0 = store.claim([&](const std::vector<Trial>&) { return tricky; }, 3);
    ASSERT_TRUE(t0.has_value());
    EXPECT_EQ(t0->number, 0);
    EXPECT_TRUE(trial_params_equal_bitwise(t0->params, tricky));
    EXPECT_TRUE(store.report(0, 100, 2.5));
    EXPECT_TRUE(store.report(0, 200, objective));
    EXPECT_TRUE(store.finish(0, TrialState::kComplete, objective, ""));
    auto t1 = store.claim(store_test_sampler(), 3);
    ASSERT_TRUE(t1.has_value());
    EXPECT_TRUE(store.finish(t1->number, TrialState::kPruned, 7.0, "below the median at step 100"));
    auto t2 = store.claim(store_test_sampler(), 3);
    ASSERT_TRUE(t2.has_value());
    EXPECT_TRUE(store.finish(t2->number, TrialState::kFailed, std::nullopt, "loss diverged"));
  }
  auto store = StudyStore::open(path, store_test_info());
  const auto all = store.trials();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].state, TrialState::kComplete);
  EXPECT_TRUE(trial_params_equal_bitwise(all[0].params, tricky));
  EXPECT_EQ(std::get<std::int64_t>(all[0].params.at("three")), 3);  // an int stays an int
  ASSERT_TRUE(all[0].value.has_value());
  EXPECT_EQ(store_test_bits(*all[0].value), store_test_bits(objective));
  ASSERT_EQ(all[0].intermediate.size(), 2u);
  EXPECT_EQ(store_test_bits(all[0].intermediate.at(200)), store_test_bits(objective));
  EXPECT_EQ(all[0].attempts, 1);
  EXPECT_EQ(all[1].state, TrialState::kPruned);
  EXPECT_EQ(all[1].reason, "below the median at step 100");
  EXPECT_EQ(all[1].value, std::optional<double>(7.0));
  EXPECT_EQ(all[2].state, TrialState::kFailed);
  EXPECT_FALSE(all[2].value.has_value());
  EXPECT_EQ(all[2].reason, "loss diverged");
  EXPECT_EQ(store.info().space_fingerprint, "space-fp-1");
}

TEST(StudyStore, ReopenForAnotherStudyIsRefusedNamingFileAndField) {
  TempDir dir;
  const std::string path = (dir / "sweep.db").string();
  { StudyStore::open(path, store_test_info()); }
  auto changed = [&](auto edit) {
    StudyInfo info = store_test_info();
    edit(info);
    return error_of<ConfigError>([&] { StudyStore::open(path, info); });
  };
  const std::string space = changed([](StudyInfo& i) { i.space_fingerprint = "space-fp-2"; });
  EXPECT_NE(space.find(path + " was created for a different search space"), std::string::npos) << space;
  EXPECT_NE(space.find("use a new study file or the same search space"), std::string::npos) << space;
  EXPECT_NE(space.find("space-fp-1"), std::string::npos) << space;
  const std::string direction = changed([](StudyInfo& i) { i.direction = "max"; });
  EXPECT_NE(direction.find("different direction"), std::string::npos) << direction;
  EXPECT_NE(changed([](StudyInfo& i) { i.objective = "train_loss"; }).find("objective"), std::string::npos);
  EXPECT_NE(changed([](StudyInfo& i) { i.name = "other"; }).find("study name"), std::string::npos);
  const std::string bad = changed([](StudyInfo& i) { i.direction = "minimize"; });
  EXPECT_NE(bad.find("\"min\" or \"max\""), std::string::npos) << bad;
  StudyStore::open(path, store_test_info());  // the file is still good
  StudyStoreOptions no_timeout;
  no_timeout.heartbeat_timeout_s = 0.0;
  EXPECT_NE(error_of<ConfigError>([&] { StudyStore::open(path, store_test_info(), no_timeout); })
                .find("heartbeat_timeout_s"),
            std::string::npos);
  StudyStoreOptions negative_wait;
  negative_wait.busy_timeout_s = -1.0;
  EXPECT_THROW(StudyStore::open(path, store_test_info(), negative_wait), ConfigError);
}

TEST(StudyStore, ReadOnlyFileIsRefusedBeforeAnyWork) {
  TempDir dir;
  const std::string path = (dir / "sweep.db").string();
  { StudyStore::open(path, store_test_info()); }
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  // In a child, so that root can become a user who may read but not write the file.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && ::setuid(65534) != 0) ::_exit(2);  // nobody
    try {
      StudyStore::open(path, store_test_info());
    } catch (const IoError& e) {
      ::_exit(std::string(e.what()).find(path + " can only be read") == std::string::npos ? 3 : 0);
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: cannot drop root, 3: another message, 4: another error, 5: no error";
}

TEST(StudyStore, GarbageFileIsRefusedWithOneLineError) {
  TempDir dir;
  std::string noise(8192, '\0');
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 2654435761u) >> 13);
  for (const std::string& content : {noise, std::string("not a database\n")}) {
    const std::string path = dir.write("garbage.db", content).string();
    const std::string message = error_of<IoError>([&] { StudyStore::open(path, store_test_info()); });
    EXPECT_NE(message.find(path + " is not an hwtrain study: it is not a SQLite database"), std::string::npos)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  const std::string missing_dir = (dir / "no" / "such" / "dir" / "sweep.db").string();
  EXPECT_NE(error_of<IoError>([&] { StudyStore::open(missing_dir, store_test_info()); }).find(missing_dir),
            std::string::npos);
}

// Creates a SQLite file at `path` with `sql` run on it, outside the study store.
void make_sqlite_file(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  EXPECT_EQ(sqlite3_close(db), SQLITE_OK);
}

TEST(StudyStore, ForeignSchemaAndOtherVersionAreRefused) {
  TempDir dir;
  const std::string foreign = (dir / "optuna.db").string();
  make_sqlite_file(foreign, "CREATE TABLE studies (study_id INTEGER PRIMARY KEY)");
  const std::string m1 = error_of<IoError>([&] { StudyStore::open(foreign, store_test_info()); });
  EXPECT_NE(m1.find(foreign + " is a SQLite database but not an hwtrain study"), std::string::npos) << m1;

  const std::string newer = (dir / "newer.db").string();
  { StudyStore::open(newer, store_test_info()); }
  make_sqlite_file(newer, "PRAGMA user_version = 7");
  const std::string m2 = error_of<IoError>([&] { StudyStore::open(newer, store_test_info()); });
  EXPECT_NE(m2.find(newer + " is an hwtrain study of schema version 7"), std::string::npos) << m2;

  const std::string damaged = (dir / "damaged.db").string();
  {
    auto store = StudyStore::open(damaged, store_test_info());
    ASSERT_TRUE(store.claim(store_test_sampler(), 1).has_value());
  }
  make_sqlite_file(damaged, "UPDATE trials SET params_json = '[1,2]'");
  auto store = StudyStore::open(damaged, store_test_info());
  const std::string m3 = error_of<IoError>([&] { store.trials(); });
  EXPECT_NE(m3.find(damaged + " trial 0: params_json is not a JSON object"), std::string::npos) << m3;
}

// A resumed sweep whose base config says something else is refused by the setting that changed; a
// study of schema version 1 (no base recorded) takes the first base it is opened with.
TEST(StudyStore, AnotherBaseConfigIsRefusedByTheSettingThatChanged) {
  TempDir dir;
  StudyInfo info = store_test_info();
  info.base_config = "[train]\nlr = 0.001\n";
  const std::string path = (dir / "base.db").string();
  { StudyStore::open(path, info); }
  { StudyStore::open(path, info); }
  StudyInfo edited = info;
  edited.base_config = "[train]\nlr = 0.002\n";
  const std::string m = error_of<ConfigError>([&] { StudyStore::open(path, edited); });
  EXPECT_NE(m.find(path + " was created with another base config (train.lr = 0.001 in the study, 0.002 now)"),
            std::string::npos) << m;

  make_sqlite_file(path, "ALTER TABLE meta DROP COLUMN base_config; PRAGMA user_version = 1");
  { StudyStore::open(path, edited); }  // migrated: the study now records 0.002
  EXPECT_NO_THROW(StudyStore::open(path, edited));
  const std::string back = error_of<ConfigError>([&] { StudyStore::open(path, info); });
  EXPECT_NE(back.find("train.lr = 0.002 in the study, 0.001 now"), std::string::npos) << back;
}

TEST(StudyStore, ClaimRespectsMaxTrialsAndPassesHistory) {
  TempDir dir;
  const std::string path = (dir / "sweep.db").string();
  auto store = StudyStore::open(path, store_test_info());
  std::vector<std::size_t> history_sizes;
  for (std::int64_t i = 0; i < 3; ++i) {
    auto t = store.claim(store_test_sampler(&history_sizes), 3);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->number, i);
    EXPECT_EQ(t->state, TrialState::kRunning);
    EXPECT_EQ(std::get<std::int64_t>(t->params.at("layers")), i + 2);
    EXPECT_TRUE(store.finish(i, TrialState::kComplete, 1.0, ""));
  }
  EXPECT_FALSE(store.claim(store_test_sampler(&history_sizes), 3).has_value());
  EXPECT_EQ(history_sizes, (std::vector<std::size_t>{0, 1, 2}));
  // The same command with a larger budget goes on from trial 3; nothing is repeated.
  auto more = store.claim(store_test_sampler(), 4);
  ASSERT_TRUE(more.has_value());
  EXPECT_EQ(more->number, 3);
  EXPECT_THROW(store.claim(store_test_sampler(), 0), ConfigError);
  // Each trial's wall time is kept: a resumed sweep can show the earlier trials' seconds.
  const auto all = store.trials();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_GT(all[0].started_unix, 1.7e9);
  ASSERT_TRUE(all[0].finished_unix.has_value());
  EXPECT_GE(*all[0].finished_unix, all[0].started_unix);
  EXPECT_FALSE(all[3].finished_unix.has_value()) << "still running";
}

TEST(StudyStore, SamplerThatThrowsWritesNothing) {
  TempDir dir;
  auto store = StudyStore::open((dir / "sweep.db").string(), store_test_info());
  auto throwing = [](const std::vector<Trial>&) -> Params { throw ConfigError("space exhausted"); };
  EXPECT_THROW(store.claim(throwing, 5), ConfigError);
  EXPECT_TRUE(store.trials().empty());
  EXPECT_THROW(store.claim([](const std::vector<Trial>&) { return Params{{"lr", NAN}}; }, 5), ConfigError);
  EXPECT_TRUE(store.trials().empty());
  auto t = store.claim(store_test_sampler(), 5);  // the store is still usable
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->number, 0);
}

// Child process body for the concurrency test: claims until the study is full, writing each number
// it got to `numbers_path`. Exits with the count claimed, or 200+ on any failure.
[[noreturn]] void claim_until_full_in_child(const std::string& path, const std::string& numbers_path,
                                            int max_trials) {
  int claimed = 0;
  try {
    auto store = StudyStore::open(path, store_test_info());
    std::ofstream numbers(numbers_path);
    while (auto t = store.claim(store_test_sampler(), max_trials)) {
      numbers << t->number << "\n" << std::flush;
      if (!store.report(t->number, 1, 2.0)) ::_exit(201);
      if (!store.finish(t->number, TrialState::kComplete, static_cast<double>(t->number), "")) ::_exit(202);
      ++claimed;
    }
  } catch (...) {
    ::_exit(203);
  }
  ::_exit(claimed);
}

TEST(StudyStore, ConcurrentProcessesGetDistinctTrialsWithinTheBudget) {
  TempDir dir;
  const std::string path = (dir / "sweep.db").string();
  constexpr int kNumChildren = 4;
  constexpr int kMaxTrials = 24;
  std::vector<pid_t> children;
  for (int c = 0; c < kNumChildren; ++c) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) claim_until_full_in_child(path, (dir / ("numbers-" + std::to_string(c))).string(), kMaxTrials);
    children.push_back(pid);
  }
  int total = 0;
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_LT(WEXITSTATUS(status), 200) << "child failed with " << WEXITSTATUS(status);
    total += WEXITSTATUS(status);
  }
  EXPECT_EQ(total, kMaxTrials);
  std::multiset<std::int64_t> numbers;
  for (int c = 0; c < kNumChildren; ++c) {
    std::ifstream in(dir / ("numbers-" + std::to_string(c)));
    for (std::int64_t n = 0; in >> n;) numbers.insert(n);
  }
  ASSERT_EQ(numbers.size(), static_cast<std::size_t>(kMaxTrials));
  EXPECT_EQ(std::set<std::int64_t>(numbers.begin(), numbers.end()).size(), numbers.size());  // no duplicates
  auto store = StudyStore::open(path, store_test_info());
  const auto all = store.trials();
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kMaxTrials));
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].number, static_cast<std::int64_t>(i));
    EXPECT_EQ(all[i].state, TrialState::kComplete);
    EXPECT_EQ(all[i].value, std::optional<double>(static_cast<double>(i)));
  }
}

}  // namespace
}  // namespace hwt::sweep
