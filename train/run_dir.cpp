#include "train/run_dir.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "common/files.h"

namespace kz {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string new_run_id() {
    std::random_device rd;
    char buf[64];
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
    char suffix[16];
    std::snprintf(suffix, sizeof(suffix), "-%06x", rd() & 0xffffff);
    return std::string(buf) + suffix;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void exec(sqlite3* db, const std::string& sql, const std::string& path) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = err ? err : "unknown error";
        sqlite3_free(err);
        throw std::runtime_error(path + ": " + msg);
    }
}

// The run ran without a setting added since, which is what the setting's default reproduces.
void take_added_defaults(json& recorded, const json& now, const json& defaults) {
    for (auto& [k, v] : now.items()) {
        if (!defaults.contains(k)) continue;
        if (!recorded.contains(k)) {
            if (defaults[k] == v) recorded[k] = v;
        } else if (v.is_object() && recorded[k].is_object()) {
            take_added_defaults(recorded[k], v, defaults[k]);
        }
    }
}

}  // namespace

RunDir::RunDir(const std::string& path, const json& config, bool resume, const json& defaults) : path_(path) {
    const bool exists = fs::exists(file("run.json"));
    if (exists && !resume)
        throw std::runtime_error(path +
                                 " already holds a run (run.json): pass --resume to continue it, or another --out");
    if (!exists && resume) throw std::runtime_error(path + " holds no run to resume (no run.json)");
    fs::create_directories(path_);
    lock_.emplace(file("run.lock"), path + " is in use by another trainer");
    if (exists) {
        json run = json::parse(read_file(file("run.json")));
        json recorded = run.value("config", json::object()), now = config;
        take_added_defaults(recorded, now, defaults);
        // What may change on resume: how long to run, and where verdicts come from (same settings).
        for (json* j : {&recorded, &now}) {
            for (const char* k : {"iterations", "verification_budget", "token_budget"}) j->erase(k);
            if (j->contains("verifier") && (*j)["verifier"].is_object()) (*j)["verifier"].erase("url");
        }
        if (recorded != now) {
            std::string diff;
            for (auto& [k, v] : now.items())
                if (!recorded.contains(k) || recorded[k] != v) diff += (diff.empty() ? "" : ", ") + k;
            throw std::runtime_error(path + " was started with another configuration (differs in: " + diff + ")");
        }
        run_id_ = run.value("run_id", std::string());
    } else {
        run_id_ = new_run_id();
        write_file_atomic(file("run.json"), json({{"run_id", run_id_}, {"config", config}}).dump(2) + "\n");
    }
    std::string db_path = file("run.sqlite");
    db_ = open_sqlite(db_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "");
    exec(db_.get(), "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", db_path);
    exec(db_.get(),
         "CREATE TABLE IF NOT EXISTS metrics (iteration INTEGER PRIMARY KEY, value TEXT NOT NULL);"
         "CREATE TABLE IF NOT EXISTS stages (iteration INTEGER NOT NULL, stage TEXT NOT NULL,"
         " seconds REAL NOT NULL, PRIMARY KEY (iteration, stage));",
         db_path);
    checkpoints_.emplace(path_ + "/checkpoints", "iter-");
}

std::string RunDir::checkpoint_path(const std::string& run_path, int64_t it) {
    return CheckpointSeries::path(run_path + "/checkpoints", "iter-", it);
}
std::string RunDir::eval_dir(int64_t it) const { return CheckpointSeries::path(path_ + "/eval", "iter-", it); }

void RunDir::record_metrics(int64_t it, const json& m) {
    bool present = false;
    for (const auto& j : metrics())
        if (j.value("iteration", int64_t{-1}) == it) present = true;
    if (!present) append_durable(file("metrics.jsonl"), m.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
    const std::string db_path = file("run.sqlite");
    exec(db_.get(), "BEGIN;", db_path);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db_.get(), "INSERT OR REPLACE INTO metrics (iteration, value) VALUES (?1, ?2);", -1, &st,
                       nullptr);
    std::string v = m.dump(-1, ' ', false, json::error_handler_t::replace);
    sqlite3_bind_int64(st, 1, it);
    sqlite3_bind_text(st, 2, v.c_str(), -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        exec(db_.get(), "ROLLBACK;", db_path);
        throw std::runtime_error(db_path + ": " + sqlite3_errmsg(db_.get()));
    }
    if (m.contains("stage_s") && m["stage_s"].is_object())
        for (auto& [stage, secs] : m["stage_s"].items()) {
            sqlite3_prepare_v2(db_.get(),
                               "INSERT OR REPLACE INTO stages (iteration, stage, seconds) VALUES (?1, ?2, ?3);", -1,
                               &st, nullptr);
            sqlite3_bind_int64(st, 1, it);
            sqlite3_bind_text(st, 2, stage.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_double(st, 3, secs.get<double>());
            sqlite3_step(st);
            sqlite3_finalize(st);
        }
    exec(db_.get(), "COMMIT;", db_path);
}

std::vector<json> RunDir::metrics() const { return read_json_lines(file("metrics.jsonl")); }

namespace {
std::atomic<bool> g_output{true};
}

void set_train_output(bool enabled) { g_output = enabled; }

void StageTimer::reset(int64_t it) {
    iteration_ = it;
    stages_.clear();
}

void StageTimer::start(const std::string& name) {
    current_ = name;
    t0_ = now_s();
    if (g_output) std::fprintf(stderr, "[train] iter %lld: %s ...\n", static_cast<long long>(iteration_), name.c_str());
}

void StageTimer::stop() {
    double s = now_s() - t0_;
    stages_.emplace_back(current_, s);
    if (g_output)
        std::fprintf(stderr, "[train] iter %lld: %s %.1f s\n", static_cast<long long>(iteration_), current_.c_str(), s);
}

json StageTimer::to_json() const {
    json j = json::object();
    for (const auto& [k, v] : stages_) j[k] = v;
    return j;
}

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)), total_(total), tty_(isatty(2)), quiet_(!g_output) {}

void Progress::advance(int64_t n) {
    done_ += n;
    if (tty_ && !quiet_)
        std::fprintf(stderr, "\r[train] %s %lld/%lld", label_.c_str(), static_cast<long long>(done_),
                     static_cast<long long>(total_));
}

Progress::~Progress() {
    if (quiet_) return;
    if (tty_)
        std::fprintf(stderr, "\n");
    else
        std::fprintf(stderr, "[train] %s %lld/%lld\n", label_.c_str(), static_cast<long long>(done_),
                     static_cast<long long>(total_));
}

}  // namespace kz
