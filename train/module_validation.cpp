#include "train/module_validation.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>

#include "tasks/pipeline.h"
#include "tasks/validation.h"
#include "train/data_parallel.h"
#include "train/stored_task.h"
#include "verify/device_memory.h"

namespace kz {

TrainValidation train_validation(const TrainConfig& cfg, bool data_parallel) {
    TrainValidation t;
    ValidationOptions& v = t.options;
    v.device = cfg.verify_device;
    v.compile = cfg.verify_device.rfind("cuda", 0) == 0;
    v.workers = cfg.propose.validation_workers;
    // The workers start (and compile once) while the models load: otherwise a worker's first module
    // pays for its start and Inductor's set-up, seconds that land on whichever iteration first
    // needs that many workers at once.
    v.warm_up = cfg.propose.enabled;
    // Every local rank validates at the same time: their workers share the host's CPUs.
    if (data_parallel) v.processes_on_host = DistEnv::from_environment().value_or(DistEnv{}).local_world;
    // The validators share the device with the verifier's jobs and start after it: their contexts are
    // kept out of the jobs' memory, and what a validation allocates it holds of the verifier's budget
    // while it runs (ValidationOptions::device_budget, set once the verifier has started).
    if (validation_memory_cap(v) > 0 && cfg.propose.enabled) t.reserved_device_bytes = v.workers * kCudaContextBytes;
    return t;
}

using json = nlohmann::json;

// One validate_and_store call's candidates and results, shared with its worker threads, which may
// outlive the call.
struct ModuleValidation::Round {
    std::string name;  // the same on every rank: names the shared counters and results
    std::vector<Candidate> cands;
    json known;  // per candidate: null (validate it), "stored" (this submission stored it), or its verdict
    std::vector<std::vector<size_t>> dups;   // per candidate: the earlier ones it is a near-duplicate of
    std::atomic<bool> decided{false};        // the caller has what it needs: take no more candidates
    std::atomic<int64_t> next{0}, valid{0};  // one process: the counters the ranks share otherwise
    std::mutex mu;                           // one process: results by candidate, published below
    std::condition_variable cv;
    std::map<int64_t, std::string> results;
};

ModuleValidation::ModuleValidation(const Ranks& ranks, TaskPipeline* pipeline, TaskValidator* validator, int workers)
    : ranks_(ranks), pipeline_(pipeline), validator_(validator), workers_(workers) {}

ModuleValidation::~ModuleValidation() { join_all(); }

void ModuleValidation::join_all() {
    for (auto& t : threads_) t.join();
    threads_.clear();
}

void ModuleValidation::publish(Round& r, int64_t k, const std::string& value) {
    if (Collective* dp = ranks_.collective()) return dp->publish(r.name + "/" + std::to_string(k), value);
    {
        std::lock_guard lock(r.mu);
        r.results[k] = value;
    }
    r.cv.notify_all();
}

json ModuleValidation::await(Round& r, int64_t k) {
    std::string value;
    if (Collective* dp = ranks_.collective()) {
        value = dp->await(r.name + "/" + std::to_string(k), kCollectiveTimeout);
    } else {
        std::unique_lock lock(r.mu);
        r.cv.wait(lock, [&] { return r.results.count(k) > 0; });
        value = r.results[k];
    }
    json j = json::parse(value);
    if (j.contains("error"))
        throw std::runtime_error("validating candidate " + std::to_string(k) +
                                 " failed: " + j["error"].get<std::string>());
    return j;
}

std::vector<TaskRecord> ModuleValidation::validate_and_store(int64_t n, const std::function<Candidate(int64_t)>& make,
                                                             int64_t enough, const std::string& origin,
                                                             int64_t iteration, const std::string& submission) {
    join_all();
    const bool leader = ranks_.leader();
    auto r = std::make_shared<Round>();
    // Every rank makes the same calls, so the names are the same on all.
    r->name = "validate/" + std::to_string(iteration) + "/" + std::to_string(rounds_++);
    for (int64_t k = 0; k < n; ++k) r->cands.push_back(make(k));
    json prior = {{"known", json::array()}, {"dups", json::array()}};
    if (leader) {
        std::vector<std::string> sources;
        for (const auto& c : r->cands) {
            sources.push_back(c.source);
            if (pipeline_->resubmitted(c.source, submission))
                prior["known"].push_back(enough <= 0 ? json("stored") : json(nullptr));
            else if (auto v = pipeline_->screen(c.source))
                prior["known"].push_back(v->to_json());
            else
                prior["known"].push_back(nullptr);
        }
        prior["dups"] = pipeline_->earlier_near_duplicates(sources);
    }
    prior = ranks_.from_leader(prior);
    r->known = prior["known"];
    r->dups = prior["dups"].get<std::vector<std::vector<size_t>>>();
    Collective* dp = ranks_.collective();
    auto work = [this, r, n, enough, dp, leader] {
        auto take = [&]() -> int64_t { return dp ? dp->claim(r->name) : r->next++; };
        auto valid_so_far = [&](int64_t add) -> int64_t {
            return dp ? dp->add(r->name + "/valid", add) : (r->valid += add);
        };
        for (int64_t k; !r->decided && !(enough > 0 && valid_so_far(0) >= enough) && (k = take()) < n;) {
            const auto i = static_cast<size_t>(k);
            if (!r->known[i].is_null()) continue;
            std::string value;
            try {
                const TaskValidation v = leader ? pipeline_->validate(r->cands[i].source, r->cands[i].apis)
                                                : validator_->validate(r->cands[i].source, r->cands[i].apis);
                // A near-duplicate of an earlier candidate is stored valid only if none of those is:
                // it is not counted (the round may take a candidate more than it needs).
                if (v.valid && r->dups[i].empty()) valid_so_far(1);
                value = v.to_json().dump();
            } catch (const std::exception& e) {
                value = json{{"error", e.what()}}.dump();
            } catch (...) {
                value = json{{"error", "unknown exception"}}.dump();
            }
            try {
                publish(*r, k, value);
            } catch (...) {  // the store is gone (a rank died): the caller's await reports it
                return;
            }
        }
    };
    for (int t = 0; t < std::min<int64_t>(workers_, n); ++t) threads_.emplace_back(work);
    // What is stored: every candidate, or the numbers up to the `enough`-th valid one (none was stored
    // before then, and every number below it was taken: numbers are taken in order, and no worker
    // stops taking while fewer than `enough` have come out valid).
    std::vector<json> validations(static_cast<size_t>(n));  // null: stored before, validated no more
    std::vector<bool> kept(static_cast<size_t>(n), false);  // what submit() will store valid
    size_t end = 0;
    try {
        for (int64_t valid = 0; end < validations.size() && (enough <= 0 || valid < enough); ++end) {
            const json& known = r->known[end];
            if (known.is_string()) continue;
            validations[end] = known.is_object() ? known : await(*r, static_cast<int64_t>(end));
            kept[end] = validations[end].at("valid").get<bool>() &&
                        std::none_of(r->dups[end].begin(), r->dups[end].end(), [&](size_t j) { return kept[j]; });
            valid += kept[end];
        }
    } catch (...) {
        r->decided = true;
        throw;
    }
    r->decided = true;
    json stored_records = json::array();
    if (leader)
        for (size_t i = 0; i < end; ++i) {
            std::optional<TaskValidation> v;
            if (!validations[i].is_null()) v = TaskValidation::from_json(validations[i]);
            stored_records.push_back(to_json(pipeline_->submit(r->cands[i].source, r->cands[i].apis, r->cands[i].level,
                                                               origin, submission, v ? &*v : nullptr)));
        }
    std::vector<TaskRecord> out;
    for (const auto& t : ranks_.from_leader(stored_records)) out.push_back(task_of(t));
    return out;
}

}  // namespace kz
