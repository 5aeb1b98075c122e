// Rollout records (design section 3): one JSON object per sampled completion, appended and fsync'ed
// to a JSONL file as soon as its step is judged, so that a killed run loses no record and a resumed
// one can tell which (iteration, role, task, sample) it already has.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

namespace kz {

struct RolloutRecord {
    std::string run_id;
    int64_t iteration = 0;
    // "coder" (a CA-GRPO step), "proposer" (a proposed module), "probe" (the Coder measured on a
    // proposed module: the samples behind p-hat, design 6.2; not trained on)
    std::string role;
    std::string task_hash;  // the task store's exact-source hash
    int sample = 0;
    std::vector<int64_t> prompt_tokens, completion_tokens;
    std::string completion;
    std::vector<float> logprobs;  // the sampler's, one per completion token
    nlohmann::json verdict;       // the verdict object (design section 3), or null
    double reward = 0, advantage = 0;
    std::string model_version;  // e.g. "coder@iter-3"

    nlohmann::json to_json() const;
    // Throws std::invalid_argument naming the missing or mistyped field.
    static RolloutRecord from_json(const nlohmann::json& j);
    std::tuple<int64_t, std::string, std::string, int> key() const { return {iteration, role, task_hash, sample}; }
};

// Appends the records with one durable write (common/files.h: append_durable): a step's records land
// together. After a crash,
// read_rollouts() first: it repairs a torn last line, which an append would otherwise extend.
void append_rollouts(const std::string& path, const std::vector<RolloutRecord>& records);

// Every complete record of the file (a partial last line from a crash is cut away first; a line
// that is not a record is skipped and counted in `skipped`).
std::vector<RolloutRecord> read_rollouts(const std::string& path, int* skipped = nullptr);

}  // namespace kz
