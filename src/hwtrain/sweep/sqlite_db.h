// A checked RAII wrapper over the SQLite3 C API, for the study store: a connection, prepared
// statements with typed binds and reads, and a transaction guard that rolls back unless committed.
// Every failing sqlite3 call throws IoError naming the database file, what was being done and
// sqlite3_errmsg. It offers only what the study store needs; it is not a general database layer,
// and a connection must not be used across fork() (open a new one in the child).
#pragma once
#include <cstdint>
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace hwt::sweep {

class SqliteDb {
 public:
  // Opens (creating if missing) the database at `path` for reading and writing; a busy database is
  // waited for up to `busy_timeout_s` before a statement fails with "database is locked".
  static SqliteDb open(const std::string& path, double busy_timeout_s);
  ~SqliteDb();
  SqliteDb(SqliteDb&& other) noexcept;
  SqliteDb& operator=(SqliteDb&& other) noexcept;
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs one or more statements that return no rows the caller needs.
  void exec(const std::string& sql) const;
  // Rows changed by the last INSERT, UPDATE or DELETE on this connection.
  std::int64_t changes() const;
  // The extended result code of the last failed call (e.g. SQLITE_NOTADB), for callers that
  // want to turn a particular failure into a clearer message.
  int last_error_code() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }
  // Throws IoError "<path>: <doing>: <sqlite3_errmsg>".
  [[noreturn]] void fail(const std::string& doing) const;

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_ = nullptr;
  std::string path_;
};

// One prepared statement; bind parameters are numbered from 1, result columns from 0.
class SqlStatement {
 public:
  SqlStatement(const SqliteDb& db, const std::string& sql);
  ~SqlStatement();
  SqlStatement(const SqlStatement&) = delete;
  SqlStatement& operator=(const SqlStatement&) = delete;

  SqlStatement& bind_int(int index, std::int64_t value);
  SqlStatement& bind_real(int index, double value);  // a NaN is stored as NULL (SQLite's rule)
  SqlStatement& bind_text(int index, const std::string& value);
  SqlStatement& bind_null(int index);

  // Advances to the next row: true while there is one, false when the statement is done.
  bool step();
  // Runs a statement that returns no rows.
  void run();

  bool is_null(int column) const;
  std::int64_t int_at(int column) const;
  double real_at(int column) const;
  std::string text_at(int column) const;

 private:
  void check_bind(int rc, int index);
  const SqliteDb* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

enum class SqlTxnKind {
  kRead,   // BEGIN (deferred): a consistent snapshot for several reads
  kWrite,  // BEGIN IMMEDIATE: takes the write lock now, so read-then-write can never deadlock
};

// A transaction on `db`: rolled back on scope exit unless commit() was called.
class SqlTransaction {
 public:
  SqlTransaction(const SqliteDb& db, SqlTxnKind kind);
  ~SqlTransaction();
  SqlTransaction(const SqlTransaction&) = delete;
  SqlTransaction& operator=(const SqlTransaction&) = delete;
  void commit();

 private:
  const SqliteDb* db_;
  bool open_ = true;
};

}  // namespace hwt::sweep
