// Validation of a task module (design section 4), every check by name. The runtime checks run in a
// trusted reference worker (python/kernelzero/worker/validate.py); a module that crashes or hangs
// that worker is invalid, and the worker is replaced. novel and decontaminated compare sources with
// the task store and with registered benchmark sets; without them they are skipped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/memory_budget.h"
#include "tasks/api_catalog.h"

namespace kz {

struct ValidationOptions {
    std::string device = "cpu";
    double min_runtime_ms = 0.0, max_runtime_ms = 1000.0, max_memory_mb = 4096.0;
    bool compile = false;  // also run torch.compile (reported as "compile")
    std::chrono::seconds timeout{300};
    std::string work_dir;  // scratch space ("" = a fresh temporary directory)
    int workers = 1;       // validations at once, one reference worker (and scratch directory) each
    // Start every worker when the validator is made, each in a thread of its own, and have it pay its
    // one-time costs (CUDA context; with `compile`, Inductor's set-up and a first compilation) before
    // its first module; validate() takes a worker once it is warm. Off: workers start on first use.
    bool warm_up = false;
    // Processes on this host that validate at the same time (the trainer's local ranks): with `workers`,
    // what each worker's share of the CPUs is divided by (see validation_compile_threads).
    int processes_on_host = 1;
    // The device memory the validations share with the verifier's jobs (the verifier's budget; not
    // owned, it must outlive the validator), or null. While set, a validation holds
    // validation_memory_hold() of it from before its module runs until its worker has handed its
    // cached memory back to the device, waiting its turn among the jobs: the validators need no share
    // of the device kept out of the jobs' for their worst case.
    DeviceMemoryBudget* device_budget = nullptr;
};

// Inductor's compile threads for one validation worker: the available CPUs (this process's affinity)
// divided among every worker of every validating process on the host, at least 1. Inductor's own
// default is a pool of min(32, cores) per process: with 4-8 workers per host compiling at once, the
// pools only contend for the same CPUs.
int validation_compile_threads(int workers, int processes_on_host);

// What one validation worker's allocator may hold on a GPU: a validation keeps a few forwards'
// memory at once (outputs of several runs, two input sets, torch.compile's buffers), each within
// the memory band. A module that needs more fails memory_band in its own worker, never a neighbour's
// job.
int64_t validation_memory_cap(const ValidationOptions& opts);
// What one validation holds of opts.device_budget while it runs: its worker's cap, or the whole
// budget where that is less (the validation then runs with none of the budget's jobs beside it; its
// worker's cap still bounds it). 0 without a budget.
int64_t validation_memory_hold(const ValidationOptions& opts);

struct TaskValidation {
    bool valid = false;
    std::map<std::string, std::string> checks;       // name -> pass | fail | skip
    std::map<std::string, std::string> reasons;      // failed checks -> why
    nlohmann::json info = nlohmann::json::object();  // eager_ms, memory_mb, output_meta
    std::string reason;                              // the first failure, "" when valid
    nlohmann::json to_json() const;                  // {"valid", "checks", "reason", "reasons", "info"}
    // to_json()'s object back (a validation run by another process); throws nlohmann's errors on a
    // malformed one.
    static TaskValidation from_json(const nlohmann::json& j);
    // Every check not reported becomes "skip"; valid = no "fail"; reason = the first failure in report order.
    void settle();
};

// The identity of a validation: the same module source, API set (in order) and device validate alike,
// so that a record of one run (teach's validation.jsonl) can stand in for running it again (a re-run
// of teach, `tasks import --validations`). SHA-256 hex.
std::string validation_key(const std::string& device, const std::vector<std::string>& apis, const std::string& source);

// A file of recorded validations (teach's validation.jsonl), one object a line:
// {"key": validation_key, "valid", "reason", "validation": TaskValidation::to_json()}. Records of an
// older teach run lack "validation": they say valid and reason only.
nlohmann::json validation_record(const std::string& key, const TaskValidation& v);
// The records by key, the last of a key standing; a missing file reads as none. Lines without a
// string key are skipped; a "validation" that is not one throws std::runtime_error naming its record.
std::map<std::string, nlohmann::json> read_validation_records(const std::string& path);

class Worker;

class TaskValidator {
public:
    TaskValidator(const ApiCatalog& catalog, ValidationOptions opts);
    ~TaskValidator();
    // `apis`: catalog names or the torch names the catalog records (ApiCatalog::torch_api_of).
    // Throws std::invalid_argument for a name the catalog lacks; everything about the module
    // itself is a check. Thread-safe: up to `workers` calls run at once, the others wait.
    // A module that runs out of memory beside other validations (workers > 1) is validated again with
    // every worker idle, its neighbours' memory gone (info "alone": true); what that run finds stands.
    // With a device budget, a validation waits for its share of it once it has a worker.
    TaskValidation validate(const std::string& source, const std::vector<std::string>& apis);
    int workers() const { return static_cast<int>(slots_.size()); }
    const ValidationOptions& options() const { return opts_; }

private:
    struct Slot;
    void warm(Slot* slot);                         // a warm_up request; the slot is free afterwards whatever came of it
    void release(Slot* slot, bool alone = false);  // back to the free list (alone: ends a run alone)
    // One request on a free worker (alone: once every worker is free, none starting meanwhile);
    // sets `memory_failure` when the module ran out of memory.
    TaskValidation run(const nlohmann::json& req, bool alone, bool& memory_failure);
    const char* worker_device() const;  // "cuda" or "cpu": the workers' device, as their requests name it

    struct Slot {
        std::unique_ptr<Worker> worker;
        std::string work_dir;
    };
    const ApiCatalog& catalog_;
    ValidationOptions opts_;
    std::string work_dir_;
    bool owns_work_dir_ = false;
    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<Slot*> free_;
    int alone_waiting_ = 0;  // validations waiting to run alone: no other starts meanwhile
    bool alone_running_ = false;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::thread> warming_;  // joined before the workers go (a warm-up ends within its timeout)
};

// The names of every check, in report order.
const std::vector<std::string>& validation_checks();

}  // namespace kz
