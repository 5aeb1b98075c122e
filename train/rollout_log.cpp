#include "train/rollout_log.h"

#include <stdexcept>

#include "common/files.h"

namespace kz {

using json = nlohmann::json;

json RolloutRecord::to_json() const {
    return {{"run_id", run_id},
            {"iteration", iteration},
            {"role", role},
            {"task_hash", task_hash},
            {"sample", sample},
            {"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"completion", completion},
            {"logprobs", logprobs},
            {"verdict", verdict},
            {"reward", reward},
            {"advantage", advantage},
            {"model_version", model_version}};
}

RolloutRecord RolloutRecord::from_json(const json& j) {
    if (!j.is_object()) throw std::invalid_argument("a rollout record must be a JSON object");
    auto field = [&](const char* k) -> const json& {
        if (!j.contains(k)) throw std::invalid_argument(std::string("rollout record without \"") + k + "\"");
        return j[k];
    };
    RolloutRecord r;
    try {
        r.run_id = field("run_id").get<std::string>();
        r.iteration = field("iteration").get<int64_t>();
        r.role = field("role").get<std::string>();
        r.task_hash = field("task_hash").get<std::string>();
        r.sample = field("sample").get<int>();
        r.prompt_tokens = field("prompt_tokens").get<std::vector<int64_t>>();
        r.completion_tokens = field("completion_tokens").get<std::vector<int64_t>>();
        r.completion = field("completion").get<std::string>();
        r.logprobs = field("logprobs").get<std::vector<float>>();
        r.verdict = field("verdict");
        r.reward = field("reward").get<double>();
        r.advantage = field("advantage").get<double>();
        r.model_version = field("model_version").get<std::string>();
    } catch (const json::exception& e) {
        throw std::invalid_argument(std::string("rollout record field of the wrong type: ") + e.what());
    }
    if (r.role != "coder" && r.role != "proposer" && r.role != "probe")
        throw std::invalid_argument("rollout record role \"" + r.role + "\"");
    return r;
}

void append_rollouts(const std::string& path, const std::vector<RolloutRecord>& records) {
    if (records.empty()) return;
    std::string lines;
    for (const auto& r : records) lines += r.to_json().dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    append_durable(path, lines);
}

std::vector<RolloutRecord> read_rollouts(const std::string& path, int* skipped) {
    int bad = 0;
    std::vector<RolloutRecord> out;
    for (const auto& j : read_json_lines(path, &bad)) {
        try {
            out.push_back(RolloutRecord::from_json(j));
        } catch (const std::invalid_argument&) {
            ++bad;
        }
    }
    if (skipped) *skipped = bad;
    return out;
}

}  // namespace kz
