// Reference timings (eager and torch.compile), cached per (task hash, device name, torch version,
// timing method, timing iterations, whether torch.compile was timed) in SQLite. Thread-safe; WAL journal so that
// readers in other processes never block on a writer.
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/sqlite_db.h"

namespace kz {

struct BaselineKey {
    std::string task_hash, device_name, torch_version;
    std::string timing_method;  // the worker's harness.TIMING_METHOD: other methods' timings are not reused
    int timing_iters = 0;
    bool with_compile = false;
};

class BaselineCache {
public:
    explicit BaselineCache(const std::string& path);  // throws std::runtime_error naming the file
    BaselineCache(const BaselineCache&) = delete;
    BaselineCache& operator=(const BaselineCache&) = delete;

    std::optional<nlohmann::json> get(const BaselineKey& key);
    void put(const BaselineKey& key, const nlohmann::json& value);

private:
    SqliteDb db_;
    std::mutex mu_;
    std::string path_;
};

}  // namespace kz
