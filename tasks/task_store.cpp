#include "tasks/task_store.h"

#include <sqlite3.h>

#include <set>
#include <stdexcept>

namespace kz {

using json = nlohmann::json;

namespace {

// Migration N takes the schema from version N-1 to N; never edit one that has shipped.
const char* const kMigrations[] = {
    // 1
    "CREATE TABLE tasks ("
    "  id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, norm_hash TEXT NOT NULL, source TEXT NOT NULL,"
    "  apis TEXT NOT NULL, level INTEGER NOT NULL DEFAULT 0, origin TEXT NOT NULL, valid INTEGER NOT NULL,"
    "  validation TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', eager_ms REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));"
    "CREATE INDEX tasks_norm_hash ON tasks(norm_hash);"
    "CREATE TABLE attempts ("
    "  id INTEGER PRIMARY KEY, task_id INTEGER NOT NULL REFERENCES tasks(id), model_version TEXT NOT NULL,"
    "  backend TEXT NOT NULL, status TEXT NOT NULL, correct INTEGER NOT NULL, speedup REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));"
    "CREATE INDEX attempts_task ON attempts(task_id);"
    "CREATE TABLE frontier ("
    "  key TEXT PRIMARY KEY, alpha REAL NOT NULL, beta REAL NOT NULL, seen REAL NOT NULL,"
    "  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));",
};

struct Stmt {
    sqlite3_stmt* s = nullptr;
    const std::string& path;
    Stmt(sqlite3* db, const char* sql, const std::string& p) : path(p) {
        if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
            throw std::runtime_error("task store " + path + ": " + sqlite3_errmsg(db));
    }
    ~Stmt() { sqlite3_finalize(s); }
    Stmt& text(int i, const std::string& v) {
        sqlite3_bind_text(s, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
        return *this;
    }
    Stmt& integer(int i, int64_t v) {
        sqlite3_bind_int64(s, i, v);
        return *this;
    }
    Stmt& real(int i, std::optional<double> v) {
        if (v)
            sqlite3_bind_double(s, i, *v);
        else
            sqlite3_bind_null(s, i);
        return *this;
    }
    bool step() {
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        throw std::runtime_error("task store " + path + ": " + sqlite3_errmsg(sqlite3_db_handle(s)));
    }
    std::string col_text(int i) const {
        auto* p = sqlite3_column_text(s, i);
        return p ? reinterpret_cast<const char*>(p) : "";
    }
    int64_t col_int(int i) const { return sqlite3_column_int64(s, i); }
};

TaskRecord read_task(const Stmt& st) {
    TaskRecord t;
    t.id = st.col_int(0);
    t.hash = st.col_text(1);
    t.norm_hash = st.col_text(2);
    t.source = st.col_text(3);
    t.apis = json::parse(st.col_text(4)).get<std::vector<std::string>>();
    t.level = static_cast<int>(st.col_int(5));
    t.origin = st.col_text(6);
    t.valid = st.col_int(7) != 0;
    t.validation = json::parse(st.col_text(8));
    t.reason = st.col_text(9);
    if (sqlite3_column_type(st.s, 10) != SQLITE_NULL) t.eager_ms = sqlite3_column_double(st.s, 10);
    return t;
}

const char* kTaskColumns = "id, hash, norm_hash, source, apis, level, origin, valid, validation, reason, eager_ms";

}  // namespace

json StoreStats::to_json() const {
    return {{"tasks", tasks},
            {"valid", valid},
            {"distinct_norm_hashes", distinct_norm_hashes},
            {"attempts", attempts},
            {"by_origin", by_origin},
            {"valid_by_origin", valid_by_origin},
            {"api_coverage", api_coverage}};
}

void TaskStore::exec(const char* sql) const {
    char* err = nullptr;
    if (sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = err ? err : "unknown error";
        sqlite3_free(err);
        throw std::runtime_error("task store " + path_ + ": " + msg);
    }
}

TaskStore::TaskStore(const std::string& path) : path_(path) {
    db_ = open_sqlite(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "the task store ");
    try {
        sqlite3_busy_timeout(db_.get(), 30000);
        exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;");
        int version = schema_version();
        if (version > kSchemaVersion)
            throw std::runtime_error("task store " + path + " has schema version " + std::to_string(version) +
                                     ", newer than this build's " + std::to_string(kSchemaVersion));
        for (int v = version; v < kSchemaVersion; ++v) {
            exec("BEGIN IMMEDIATE");
            try {
                exec(kMigrations[v]);
                exec(("PRAGMA user_version = " + std::to_string(v + 1)).c_str());
                exec("COMMIT");
            } catch (...) {
                sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
                throw;
            }
        }
    } catch (const std::runtime_error& e) {
        std::string what = e.what();
        if (what.find("file is not a database") != std::string::npos)
            throw std::runtime_error("task store " + path + ": not an SQLite database");
        throw;
    }
}

int TaskStore::schema_version() const {
    Stmt st(db_.get(), "PRAGMA user_version", path_);
    return st.step() ? static_cast<int>(st.col_int(0)) : 0;
}

int64_t TaskStore::add_task(const TaskRecord& t) {
    Stmt find(db_.get(), "SELECT id FROM tasks WHERE hash = ?", path_);
    find.text(1, t.hash);
    if (find.step()) return find.col_int(0);
    Stmt st(db_.get(),
            "INSERT INTO tasks (hash, norm_hash, source, apis, level, origin, valid, validation, reason, eager_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            path_);
    st.text(1, t.hash)
        .text(2, t.norm_hash)
        .text(3, t.source)
        .text(4, json(t.apis).dump())
        .integer(5, t.level)
        .text(6, t.origin)
        .integer(7, t.valid ? 1 : 0)
        .text(8, t.validation.dump())
        .text(9, t.reason)
        .real(10, t.eager_ms);
    st.step();
    return sqlite3_last_insert_rowid(db_.get());
}

std::optional<TaskRecord> TaskStore::task(int64_t id) const {
    Stmt st(db_.get(), (std::string("SELECT ") + kTaskColumns + " FROM tasks WHERE id = ?").c_str(), path_);
    st.integer(1, id);
    if (!st.step()) return std::nullopt;
    return read_task(st);
}

std::optional<TaskRecord> TaskStore::task_by_hash(const std::string& hash) const {
    Stmt st(db_.get(), (std::string("SELECT ") + kTaskColumns + " FROM tasks WHERE hash = ?").c_str(), path_);
    st.text(1, hash);
    if (!st.step()) return std::nullopt;
    return read_task(st);
}

std::vector<TaskRecord> TaskStore::tasks(bool valid_only, int64_t limit) const {
    std::string sql = std::string("SELECT ") + kTaskColumns + " FROM tasks" + (valid_only ? " WHERE valid = 1" : "") +
                      " ORDER BY id LIMIT ?";
    Stmt st(db_.get(), sql.c_str(), path_);
    st.integer(1, limit);
    std::vector<TaskRecord> out;
    while (st.step()) out.push_back(read_task(st));
    return out;
}

std::vector<int64_t> TaskStore::with_norm_hash(const std::string& norm_hash) const {
    Stmt st(db_.get(), "SELECT id FROM tasks WHERE norm_hash = ? ORDER BY id", path_);
    st.text(1, norm_hash);
    std::vector<int64_t> out;
    while (st.step()) out.push_back(st.col_int(0));
    return out;
}

void TaskStore::add_attempt(const AttemptRecord& a) {
    Stmt st(
        db_.get(),
        "INSERT INTO attempts (task_id, model_version, backend, status, correct, speedup) VALUES (?, ?, ?, ?, ?, ?)",
        path_);
    st.integer(1, a.task_id)
        .text(2, a.model_version)
        .text(3, a.backend)
        .text(4, a.status)
        .integer(5, a.correct ? 1 : 0)
        .real(6, a.speedup);
    st.step();
}

std::map<std::string, std::array<double, 3>> TaskStore::frontier() const {
    Stmt st(db_.get(), "SELECT key, alpha, beta, seen FROM frontier", path_);
    std::map<std::string, std::array<double, 3>> out;
    while (st.step())
        out[st.col_text(0)] = {sqlite3_column_double(st.s, 1), sqlite3_column_double(st.s, 2),
                               sqlite3_column_double(st.s, 3)};
    return out;
}

void TaskStore::save_frontier(const std::map<std::string, std::array<double, 3>>& rows) {
    exec("BEGIN IMMEDIATE");
    try {
        for (const auto& [key, v] : rows) {
            Stmt st(db_.get(),
                    "INSERT INTO frontier (key, alpha, beta, seen) VALUES (?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                    "alpha = excluded.alpha, beta = excluded.beta, seen = excluded.seen, "
                    "updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
                    path_);
            st.text(1, key).real(2, v[0]).real(3, v[1]).real(4, v[2]);
            st.step();
        }
        exec("COMMIT");
    } catch (...) {
        sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
}

StoreStats TaskStore::stats() const {
    StoreStats s;
    {
        Stmt st(db_.get(), "SELECT origin, COUNT(*), SUM(valid) FROM tasks GROUP BY origin", path_);
        while (st.step()) {
            s.by_origin[st.col_text(0)] = st.col_int(1);
            s.valid_by_origin[st.col_text(0)] = st.col_int(2);
            s.tasks += st.col_int(1);
            s.valid += st.col_int(2);
        }
    }
    {
        Stmt st(db_.get(), "SELECT COUNT(DISTINCT norm_hash) FROM tasks", path_);
        if (st.step()) s.distinct_norm_hashes = st.col_int(0);
    }
    {
        Stmt st(db_.get(), "SELECT COUNT(*) FROM attempts", path_);
        if (st.step()) s.attempts = st.col_int(0);
    }
    {
        Stmt st(db_.get(), "SELECT apis FROM tasks WHERE valid = 1", path_);
        while (st.step())
            for (const auto& a : json::parse(st.col_text(0))) s.api_coverage[a.get<std::string>()] += 1;
    }
    return s;
}

}  // namespace kz
