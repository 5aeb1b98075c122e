// A training step's rollouts as they travel and are replayed: read back from the run's rollout
// records (a step of an iteration run again after a crash is replayed, not sampled again), and
// serialised between ranks (each samples and judges its block; every rank rebuilds the whole step).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "train/coder_step.h"
#include "train/rollout_log.h"

namespace kz {

// The rollout records of this run, by key: what a re-run iteration replays instead of sampling again.
class RecordIndex {
public:
    // Reads the records file (unreadable lines are skipped and counted on stderr).
    explicit RecordIndex(const std::string& path);
    // The records of (iteration, role, hashes[i], first_sample + j) for every i, j < G, in that order;
    // empty unless all are present.
    std::vector<const RolloutRecord*> complete(int64_t it, const std::string& role,
                                               const std::vector<std::string>& hashes, int first_sample, int G) const;
    bool has(const RolloutRecord& r) const { return by_key_.count(r.key()) > 0; }
    void add(const RolloutRecord& r) { by_key_.emplace(r.key(), r); }

private:
    std::map<std::tuple<int64_t, std::string, std::string, int>, RolloutRecord> by_key_;
};

// Rollouts rebuilt from records (a replayed step): tokens, text, log-probs and the judged outcome.
// Record i is task i / G, sample i % G.
std::vector<Rollout> rollouts_from(const std::vector<const RolloutRecord*>& recs, int G);

// A step's rollouts (G per prompt, task-major) and, for a judged step, one verdict per rollout.
struct JudgedStep {
    std::vector<Rollout> rollouts;
    std::vector<nlohmann::json> verdicts;  // judged steps only
    bool replayed = false;
};

// A rank's rows of a step: the rollouts of tasks [begin, end) (train/ranks.h: Ranks::block).
std::vector<Rollout> rows_of(const std::vector<Rollout>& all, size_t begin, size_t end);

// A step's rollouts (and verdicts, when `judged`) as JSON, for the other ranks.
nlohmann::json serialise_step(const JudgedStep& j, bool judged);
// Appends serialise_step()'s rollouts to `out`; a judged rollout's outcome is read from its verdict.
void deserialise_step(const nlohmann::json& a, bool judged, JudgedStep& out);

}  // namespace kz
