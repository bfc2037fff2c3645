#include "hwtrain/sweep/sqlite_db.h"

#include <sqlite3.h>

#include <cmath>
#include <utility>

#include "hwtrain/core/error.h"

namespace hwt::sweep {

SqliteDb SqliteDb::open(const std::string& path, double busy_timeout_s) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  SqliteDb out(db, path);  // closes `db` on every path below, including a failed open
  if (rc != SQLITE_OK) {
    if (db == nullptr) throw IoError(path + ": cannot open database: " + sqlite3_errstr(rc));
    out.fail("cannot open database");
  }
  if (sqlite3_extended_result_codes(db, 1) != SQLITE_OK) out.fail("cannot enable extended result codes");
  if (sqlite3_busy_timeout(db, static_cast<int>(std::lround(busy_timeout_s * 1000.0))) != SQLITE_OK) {
    out.fail("cannot set the busy timeout");
  }
  if (sqlite3_db_readonly(db, "main") == 1) {
    throw IoError(path + " can only be read, but the study store needs to write it; check its permissions");
  }
  return out;
}

// close_v2 and finalize can only repeat an error already reported (or defer the close until the
// last statement is finalized), and a destructor cannot throw; their results are not needed.
SqliteDb::~SqliteDb() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

SqliteDb::SqliteDb(SqliteDb&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

SqliteDb& SqliteDb::operator=(SqliteDb&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

void SqliteDb::exec(const std::string& sql) const {
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail("cannot run \"" + sql + "\"");
}

std::int64_t SqliteDb::changes() const { return sqlite3_changes(db_); }

int SqliteDb::last_error_code() const { return sqlite3_extended_errcode(db_); }

void SqliteDb::fail(const std::string& doing) const {
  std::string hint;
  const int code = sqlite3_errcode(db_) & 0xff;  // the primary code of an extended one
  if (code == SQLITE_BUSY) hint = " (another sweep process held the study longer than the busy timeout)";
  throw IoError(path_ + ": " + doing + ": " + sqlite3_errmsg(db_) + hint);
}

SqlStatement::SqlStatement(const SqliteDb& db, const std::string& sql) : db_(&db), sql_(sql) {
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
    db.fail("cannot prepare \"" + sql + "\"");
  }
}

SqlStatement::~SqlStatement() { sqlite3_finalize(stmt_); }

void SqlStatement::check_bind(int rc, int index) {
  if (rc != SQLITE_OK) db_->fail("cannot bind parameter " + std::to_string(index) + " of \"" + sql_ + "\"");
}

SqlStatement& SqlStatement::bind_int(int index, std::int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

SqlStatement& SqlStatement::bind_real(int index, double value) {
  check_bind(sqlite3_bind_double(stmt_, index, value), index);
  return *this;
}

SqlStatement& SqlStatement::bind_text(int index, const std::string& value) {
  check_bind(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT), index);
  return *this;
}

SqlStatement& SqlStatement::bind_null(int index) {
  check_bind(sqlite3_bind_null(stmt_, index), index);
  return *this;
}

bool SqlStatement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail("cannot run \"" + sql_ + "\"");
}

void SqlStatement::run() {
  while (step()) {
  }
}

bool SqlStatement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

std::int64_t SqlStatement::int_at(int column) const { return sqlite3_column_int64(stmt_, column); }

double SqlStatement::real_at(int column) const { return sqlite3_column_double(stmt_, column); }

std::string SqlStatement::text_at(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (text == nullptr) {
    if (sqlite3_errcode(db_->handle()) == SQLITE_NOMEM) db_->fail("cannot read column " + std::to_string(column));
    return "";
  }
  return std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

SqlTransaction::SqlTransaction(const SqliteDb& db, SqlTxnKind kind) : db_(&db) {
  db.exec(kind == SqlTxnKind::kWrite ? "BEGIN IMMEDIATE" : "BEGIN");
}

SqlTransaction::~SqlTransaction() {
  // A failed statement may already have rolled back; the result of this ROLLBACK does not matter.
  if (open_) sqlite3_exec(db_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void SqlTransaction::commit() {
  db_->exec("COMMIT");
  open_ = false;
}

}  // namespace hwt::sweep
