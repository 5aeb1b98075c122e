// The Coder's frontier (design 6.1) and the Proposer's reward (design 6.2).
//
// FrontierTracker keeps a Beta posterior of the Coder's pass@1 for every API and every API pair,
// updated from each verified attempt with exponential forgetting (the Coder changes: old evidence
// decays toward the prior), and draws API sets by Thompson sampling toward a target pass rate, mixed
// with exploration of rarely seen APIs.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tasks/symbolic.h"

namespace kz {

class TaskStore;

struct BetaStat {
    double alpha = 1.0, beta = 1.0;  // prior Beta(1, 1)
    double seen = 0.0;               // decayed number of observations
    double mean() const { return alpha / (alpha + beta); }
};

struct FrontierOptions {
    double forgetting = 0.995;  // per update of a key: old evidence x forgetting
    double target = 0.5;        // pass rate the sampler aims at
    double explore = 0.1;       // share of draws that favour the least-seen APIs
    int candidates = 16;        // API sets scored per draw
};

class FrontierTracker {
public:
    explicit FrontierTracker(FrontierOptions opts = {});
    // One verified attempt (or `samples` of them with `passed` successes) on a task using `apis`.
    void update(const std::vector<std::string>& apis, int passed, int samples = 1);
    const std::map<std::string, BetaStat>& stats() const { return stats_; }
    BetaStat get(const std::string& key) const;
    static std::string pair_key(const std::string& a, const std::string& b);
    // Thompson sampling: among `candidates` sampled sets, the one whose sampled pass rate (the mean
    // of its APIs' and pairs' draws) is nearest the target; with probability `explore` the set is
    // built around the least-seen API instead.
    ApiSet draw(const ApiCatalog& catalog, int level, std::mt19937_64& rng) const;

    void load(const TaskStore& store);
    void save(TaskStore& store) const;
    // {key: [alpha, beta, seen]}: the trainer's checkpoint.
    nlohmann::json to_json() const;
    void from_json(const nlohmann::json& j);  // throws std::invalid_argument for a malformed object

private:
    FrontierOptions opts_;
    std::map<std::string, BetaStat> stats_;
};

struct ProposalOutcome {
    bool parsed = true;    // false: the completion held no task file (reward -1)
    bool valid = false;    // failed validation: reward 0
    double pass_rate = 0;  // p-hat: the Coder's pass rate over its G samples
    int cluster = -1;      // near-duplicate cluster id within the batch
};

// r = -1 unparsable; 0 invalid; else 1 - |p - t| / max(t, 1 - t) - lambda_rep * rep, where rep is the
// share of the batch in the module's near-duplicate cluster.
std::vector<double> proposer_rewards(const std::vector<ProposalOutcome>& batch, double target = 0.5,
                                     double lambda_rep = 0.0);
// Modules whose pass rate lies in the band enter the Coder's training pool.
inline bool in_frontier_band(double pass_rate, double lo = 0.2, double hi = 0.8) {
    return pass_rate >= lo && pass_rate <= hi;
}
// Cluster ids for a batch of sources: same normalised source or token similarity >= threshold.
std::vector<int> near_duplicate_clusters(const std::vector<std::string>& sources, double threshold = 0.9);

}  // namespace kz
