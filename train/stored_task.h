// The trainer's view of a stored task (tasks/task_store.h), and how it travels between ranks: the
// leader owns the store; the other ranks get what they need of its records as JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tasks/task_store.h"

namespace kz {

struct StoredTask {
    int64_t id = 0;
    std::string hash, source;
    std::vector<std::string> apis;
};

StoredTask stored(const TaskRecord& t);
nlohmann::json to_json(const StoredTask& t);
StoredTask stored_of(const nlohmann::json& j);
// What the trainer reads of a stored task record (a StoredTask, valid, reason).
nlohmann::json to_json(const TaskRecord& t);
TaskRecord task_of(const nlohmann::json& j);
// The tasks' exact-source hashes, in order (the rollout records' task keys).
std::vector<std::string> hashes(const std::vector<StoredTask>& tasks);

}  // namespace kz
