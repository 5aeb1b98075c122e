#include "train/stored_task.h"

namespace kz {

using json = nlohmann::json;

StoredTask stored(const TaskRecord& t) { return {t.id, t.hash, t.source, t.apis}; }

json to_json(const StoredTask& t) { return {{"id", t.id}, {"hash", t.hash}, {"source", t.source}, {"apis", t.apis}}; }

StoredTask stored_of(const json& j) {
    return {j.at("id").get<int64_t>(), j.at("hash").get<std::string>(), j.at("source").get<std::string>(),
            j.at("apis").get<std::vector<std::string>>()};
}

json to_json(const TaskRecord& t) {
    json j = to_json(stored(t));
    j["valid"] = t.valid;
    j["reason"] = t.reason;
    return j;
}

TaskRecord task_of(const json& j) {
    TaskRecord t;
    StoredTask s = stored_of(j);
    t.id = s.id, t.hash = s.hash, t.source = s.source, t.apis = s.apis;
    t.valid = j.at("valid").get<bool>();
    t.reason = j.at("reason").get<std::string>();
    return t;
}

std::vector<std::string> hashes(const std::vector<StoredTask>& tasks) {
    std::vector<std::string> out;
    for (const auto& t : tasks) out.push_back(t.hash);
    return out;
}

}  // namespace kz
