// Validating and storing a batch of candidate modules across the ranks' validation workers (the
// proposals of a step, or symbolic modules until enough are valid). Validation times are uneven (a
// module's first torch.compile can take seconds), so candidates are shared out as workers free up,
// through a counter all ranks share, not in fixed blocks; the leader stores, in number order.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tasks/task_store.h"
#include "tasks/validation.h"
#include "train/ranks.h"
#include "train/train_config.h"

namespace kz {

class TaskPipeline;
class TaskValidator;

// A module to validate and store.
struct Candidate {
    std::string source;
    std::vector<std::string> apis;
    int level = 0;
};

// The trainer's validation of modules (the Proposer's, and symbolic ones in their place), on the
// verifier's device, and what its workers hold there for good (their CUDA contexts): the verifier
// leaves that out of its jobs' memory. What a validation allocates it reserves from the verifier's
// budget while it runs (options.device_budget, which the trainer sets once the verifier has started).
// Without the Proposer no module is validated, so no worker starts and nothing is reserved.
struct TrainValidation {
    ValidationOptions options;
    int64_t reserved_device_bytes = 0;
};
TrainValidation train_validation(const TrainConfig& cfg, bool data_parallel);

class ModuleValidation {
public:
    // The leader passes its pipeline (validation, novelty checks, the store); the other ranks a
    // validator. `workers` threads per rank validate at once. Not owned; they must outlive this.
    ModuleValidation(const Ranks& ranks, TaskPipeline* pipeline, TaskValidator* validator, int workers);
    // Waits for any worker still finishing a validation the last call did not need.
    ~ModuleValidation();

    // Validates candidates and stores them (the leader, in number order); every rank gets the stored
    // records. Candidate k (0 <= k < n) is make(k), the same on every rank. With `enough` > 0, workers
    // stop taking candidates once that many have come out valid, and only the candidates up to the one
    // that made `enough` (in number order) are stored, so which modules are stored does not depend on
    // which worker was fast; without it, all n are, and a candidate this `submission` stored before
    // (an iteration run again) is not validated again (the store returns its record). A
    // near-duplicate of a stored task or of a benchmark is not validated either: the store's checks
    // turn it down before any worker time is spent on it, and it does not count towards `enough`;
    // nor does a near-duplicate of an earlier candidate that is kept (counted, either would end the
    // round a module short: a second round).
    // Returns once every candidate up to the `enough`-th valid one is judged: a worker still
    // validating a later one (taken while the outcome was open) is not waited for. Its result is not
    // used; it finishes in the background, and the next call waits for it first (it holds a
    // validation worker): waiting for it would cost a round seconds of compilation for nothing.
    // Every rank makes the same calls (their order within `iteration` names the shared counters);
    // `submission` is the leader's (the store's name for this iteration's submissions; the other
    // ranks have no store and pass anything). Throws std::runtime_error when a candidate's validation
    // failed in the verifier's machinery.
    std::vector<TaskRecord> validate_and_store(int64_t n, const std::function<Candidate(int64_t)>& make, int64_t enough,
                                               const std::string& origin, int64_t iteration,
                                               const std::string& submission);

private:
    struct Round;
    void publish(Round& r, int64_t k, const std::string& value);
    nlohmann::json await(Round& r, int64_t k);
    void join_all();

    const Ranks& ranks_;
    TaskPipeline* pipeline_;
    TaskValidator* validator_;
    int workers_;
    int64_t rounds_ = 0;  // calls so far: names their shared counters
    // The last call's workers: some may still be finishing a validation it did not need.
    std::vector<std::thread> threads_;
};

}  // namespace kz
