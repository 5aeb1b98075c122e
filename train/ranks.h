// What the trainer's ranks share (design section 9; train/data_parallel.h has the collectives). Every
// rank runs the same iteration: the same random draws, so the same API sets, pool and task order.
// Sampling and verification are split in contiguous blocks of a step's tasks (rank r takes block r)
// and gathered, so every rank holds the whole step and computes the same rewards, advantages and
// frontier updates; each rank trains on its own block's rows (gradients all-reduced, one identical
// optimizer step). Rank 0 leads: it alone owns the run directory, the task store and the evaluation,
// and decides what is replayed. With no collective (one process) every call is the identity.
#pragma once

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kz {

class Collective;
class Policy;

// How long ranks wait for each other: a collective (one rank still sampling or validating) and the
// barrier behind rank 0's evaluation, which may take hours on a real model.
constexpr std::chrono::seconds kCollectiveTimeout{1800}, kEvalTimeout{24 * 3600};

class Ranks {
public:
    explicit Ranks(Collective* dp);  // null: one process; not owned

    Collective* collective() const { return dp_; }
    int rank() const { return rank_; }
    int world() const { return world_; }
    bool leader() const { return rank_ == 0; }
    // Whether any rank was asked to stop (every rank asks at the same points, so all stop together).
    bool stopping(const std::atomic<bool>& stop) const;
    // The leader's `j` on every rank.
    nlohmann::json from_leader(const nlohmann::json& j) const;
    // Every rank's `local`, in rank order.
    std::vector<nlohmann::json> gather(const nlohmann::json& local) const;
    // This rank's block [first, second) of n items.
    std::pair<size_t, size_t> block(size_t n) const;
    // The sum of `local` over the ranks.
    double sum(double local) const;
    void barrier(const std::string& name, std::chrono::seconds timeout) const;
    // Ranks hold the same weights (the same seeds and files, then the same updates): checked, not
    // assumed. A sum over the trainable parameters, compared exactly; throws std::runtime_error naming
    // the rank that differs.
    void check_same_weights(Policy& p) const;
    // The leader's trainable weights on every rank, and a fresh optimizer over them.
    void share_weights(Policy& p) const;

private:
    Collective* dp_;
    int rank_, world_;
};

}  // namespace kz
