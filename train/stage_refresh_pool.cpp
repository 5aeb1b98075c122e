// Stage refresh_pool: the Coder's pool for this iteration's steps: the band modules propose returned,
// plus older valid tasks of the store replayed in a seeded order (all of them feed the pool while no
// band module exists yet). Reads the task store (the leader's, shared with every rank); returns the
// pool; adds "pool" to the metrics.
#include "train/trainer_impl.h"

#include <algorithm>
#include <random>
#include <set>

#include "train/seeds.h"

namespace kz {

using json = nlohmann::json;

std::vector<StoredTask> Trainer::refresh_pool(int64_t it, const std::vector<StoredTask>& band, json& m) {
    std::vector<StoredTask> pool = band;
    std::set<int64_t> in;
    for (const auto& t : band) in.insert(t.id);
    // The leader's store lists the older tasks, for every rank.
    json listed = json::array();
    if (ranks_.leader())
        for (const auto& t : store_->tasks(/*valid_only=*/true))
            if (!in.count(t.id)) listed.push_back(to_json(stored(t)));
    std::vector<StoredTask> older;
    for (const auto& t : ranks_.from_leader(listed)) older.push_back(stored_of(t));
    std::mt19937_64 rng(derive_seed(cfg_.seed, it, kPoolStage));
    std::shuffle(older.begin(), older.end(), rng);
    // With no band module yet (a Coder that solves nothing, early on) replay alone feeds the pool.
    const size_t want = static_cast<size_t>(cfg_.coder_phase.replay) +
                        (band.empty() ? static_cast<size_t>(cfg_.coder_phase.tasks_per_step) : 0);
    for (size_t i = 0; i < older.size() && i < want; ++i) pool.push_back(older[i]);
    m["pool"] = {{"size", pool.size()}, {"from_band", band.size()}, {"replayed", pool.size() - band.size()}};
    return pool;
}

}  // namespace kz
