#include "verify/baseline_cache.h"

#include <sqlite3.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace kz {

namespace {

constexpr auto kLockWait = std::chrono::seconds(10);  // also the busy handler's timeout

// Schema set-up. Retried while another connection holds the lock, up to kLockWait: the switch to
// WAL can be refused at once without the busy handler (SQLite skips it where waiting could
// deadlock), as when two daemons sharing the cache start together.
void exec(sqlite3* db, const char* sql, const std::string& path) {
    const auto deadline = std::chrono::steady_clock::now() + kLockWait;
    for (;;) {
        char* err = nullptr;
        const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
        if (rc == SQLITE_OK) return;
        std::string msg = err ? err : "unknown error";
        sqlite3_free(err);
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || std::chrono::steady_clock::now() >= deadline)
            throw std::runtime_error("baseline cache " + path + ": " + msg);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

struct Stmt {
    sqlite3_stmt* s = nullptr;
    Stmt(sqlite3* db, const char* sql, const std::string& path) {
        if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
            throw std::runtime_error("baseline cache " + path + ": " + sqlite3_errmsg(db));
    }
    ~Stmt() { sqlite3_finalize(s); }
    void bind(const BaselineKey& k) {
        sqlite3_bind_text(s, 1, k.task_hash.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 2, k.device_name.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 3, k.torch_version.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(s, 4, k.timing_iters);
        sqlite3_bind_int(s, 5, k.with_compile ? 1 : 0);
        sqlite3_bind_text(s, 7, k.timing_method.c_str(), -1, SQLITE_TRANSIENT);
    }
};

}  // namespace

BaselineCache::BaselineCache(const std::string& path) : path_(path) {
    db_ = open_sqlite(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, "the baseline cache ");
    sqlite3_busy_timeout(db_.get(), static_cast<int>(std::chrono::milliseconds(kLockWait).count()));
    exec(db_.get(), "PRAGMA journal_mode=WAL;", path);
    exec(db_.get(), "PRAGMA synchronous=NORMAL;", path);
    // A new table rather than a new column: caches written before the timing method was part of
    // the key keep their old table, which nothing reads any more.
    exec(db_.get(),
         "CREATE TABLE IF NOT EXISTS reference_timings ("
         " task_hash TEXT NOT NULL, device_name TEXT NOT NULL, torch_version TEXT NOT NULL,"
         " timing_method TEXT NOT NULL, timing_iters INTEGER NOT NULL, with_compile INTEGER NOT NULL,"
         " value TEXT NOT NULL, created_at TEXT NOT NULL DEFAULT (datetime('now')),"
         " PRIMARY KEY (task_hash, device_name, torch_version, timing_method, timing_iters, with_compile));",
         path);
}

std::optional<nlohmann::json> BaselineCache::get(const BaselineKey& key) {
    std::lock_guard lock(mu_);
    Stmt st(db_.get(),
            "SELECT value FROM reference_timings WHERE task_hash=?1 AND device_name=?2 AND torch_version=?3 "
            "AND timing_iters=?4 AND with_compile=?5 AND timing_method=?7;",
            path_);
    st.bind(key);
    if (sqlite3_step(st.s) != SQLITE_ROW) return std::nullopt;
    const char* text = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
    try {
        return nlohmann::json::parse(text ? text : "");
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;  // a damaged row is re-measured and overwritten
    }
}

void BaselineCache::put(const BaselineKey& key, const nlohmann::json& value) {
    std::lock_guard lock(mu_);
    Stmt st(db_.get(),
            "INSERT OR REPLACE INTO reference_timings (task_hash, device_name, torch_version, timing_iters,"
            " with_compile, value, timing_method) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7);",
            path_);
    st.bind(key);
    std::string v = value.dump();
    sqlite3_bind_text(st.s, 6, v.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st.s) != SQLITE_DONE)
        throw std::runtime_error("baseline cache " + path_ + ": " + sqlite3_errmsg(db_.get()));
}

}  // namespace kz
