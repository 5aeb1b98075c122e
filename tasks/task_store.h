// The task store (design section 4): SQLite in WAL mode with synchronous=FULL, so that a committed
// write survives a crash and a kill -9 mid-write leaves the previous state. Schema versions are
// applied as numbered migrations (PRAGMA user_version). Tasks (source, hashes, API set, origin,
// validation), attempts (task, model version, backend, verdict, speedup) and frontier statistics.
// Thread safety: one TaskStore per thread; SQLite serialises writers across processes.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/sqlite_db.h"

namespace kz {

struct TaskRecord {
    int64_t id = 0;
    std::string hash, norm_hash, source, origin, reason;
    std::vector<std::string> apis;
    int level = 0;
    bool valid = false;
    nlohmann::json validation = nlohmann::json::object();  // TaskValidation::to_json()
    std::optional<double> eager_ms;
};

struct AttemptRecord {
    int64_t task_id = 0;
    std::string model_version, backend, status;
    bool correct = false;
    std::optional<double> speedup;
};

struct StoreStats {
    int64_t tasks = 0, valid = 0, distinct_norm_hashes = 0, attempts = 0;
    std::map<std::string, int64_t> by_origin;        // origin -> tasks
    std::map<std::string, int64_t> valid_by_origin;  // origin -> valid tasks
    std::map<std::string, int64_t> api_coverage;     // api -> valid tasks using it
    nlohmann::json to_json() const;
};

class TaskStore {
public:
    static constexpr int kSchemaVersion = 1;
    // Opens (creating and migrating as needed). Throws naming the file and the cause, including a
    // store written by a newer schema.
    explicit TaskStore(const std::string& path);
    TaskStore(const TaskStore&) = delete;
    TaskStore& operator=(const TaskStore&) = delete;

    // Inserts a task; returns its id. A source already stored (same exact hash) returns the
    // existing id and changes nothing.
    int64_t add_task(const TaskRecord& t);
    std::optional<TaskRecord> task(int64_t id) const;
    std::optional<TaskRecord> task_by_hash(const std::string& hash) const;  // the exact-source hash
    std::vector<TaskRecord> tasks(bool valid_only = false, int64_t limit = -1) const;
    // Ids of stored tasks whose normalised hash equals `norm_hash`.
    std::vector<int64_t> with_norm_hash(const std::string& norm_hash) const;
    void add_attempt(const AttemptRecord& a);
    // Frontier statistics: key (API or "a|b" pair) -> {alpha, beta, seen}; saved in one transaction.
    std::map<std::string, std::array<double, 3>> frontier() const;
    void save_frontier(const std::map<std::string, std::array<double, 3>>& rows);
    StoreStats stats() const;
    int schema_version() const;
    const std::string& path() const { return path_; }

private:
    std::string path_;
    SqliteDb db_;
    void exec(const char* sql) const;
};

}  // namespace kz
