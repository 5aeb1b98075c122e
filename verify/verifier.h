// The verifier: turns (task, candidate, backend) into a Verdict.
//
// Owns a pool of compile workers (static checks and ahead-of-time builds on CPU) and of lanes, each a
// trusted reference worker plus a candidate fork server bound to one device. verify() is thread-safe
// and blocking; running it from several threads pipelines compilation with execution. A worker that
// crashes, hangs or breaks the protocol is replaced and the job retried (up to max_attempts); if it
// still fails the verdict is infra_error, which is never a reward.
//
// On a GPU, device memory is scheduled (verify/device_memory.h): a job runs once its measured need
// fits beside the jobs already admitted. A candidate that runs out of memory (or whose cuDNN fails,
// or whose process dies without a result) while other jobs share the device is run again alone; it
// is blamed only when, alone, it needs clearly more than the reference.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "verify/baseline_cache.h"
#include "verify/device_memory.h"
#include "verify/service.h"
#include "verify/verdict.h"
#include "worker/protocol.h"
#include "worker/worker.h"

namespace kz {

// The in-process verifier: the default VerifyService.
class Verifier : public VerifyService {
public:
    explicit Verifier(VerifyOptions opts);
    ~Verifier() override;
    Verifier(const Verifier&) = delete;
    Verifier& operator=(const Verifier&) = delete;

    // Starts every worker in parallel and reads the device's identity. Throws std::runtime_error when
    // the workers cannot start at all (no Python, no torch): that is a set-up problem, not a verdict.
    void start() override;
    Verdict verify(const Job& job) override;
    // Kills every worker; in-flight verify() calls return infra_error. Safe from any thread.
    void shutdown() override;

    const std::string& device_name() const { return device_name_; }
    DeviceMemoryBudget* memory_budget() const override { return budget_.get(); }
    int lanes() const { return static_cast<int>(lanes_.size()); }
    const std::string& torch_version() const { return torch_version_; }
    const VerifyOptions& options() const override { return opts_; }
    // probe_s (the first reference worker started and the device read), workers_s (every other worker
    // started), warm_up_s (every worker's device opened), capacity_s (the device's free memory read).
    nlohmann::json start_stages() const override { return start_stages_; }
    int worker_starts() const;  // total process starts, for tests of replacement

private:
    struct Lane {
        std::unique_ptr<Worker> reference, candidate;
    };
    VerifyOptions opts_;
    nlohmann::json start_stages_ = nlohmann::json::object();
    std::string device_name_, torch_version_, timing_method_, nvrtc_arch_, torch_arch_list_;
    std::unique_ptr<BaselineCache> baselines_;
    std::unique_ptr<DeviceMemoryBudget> budget_;
    std::vector<std::unique_ptr<Worker>> compilers_;
    std::vector<std::unique_ptr<Lane>> lanes_;
    std::vector<Worker*> free_compilers_;
    std::vector<Lane*> free_lanes_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::string, std::shared_ptr<std::mutex>> baseline_locks_;
    std::atomic<bool> shut_down_{false};
    bool owns_work_dir_ = false;
    std::atomic<long long> job_counter_{0};

    WorkerConfig worker_config(const std::string& role, int index) const;
    // Blocks until an item of `free` is available (nullptr once shut down).
    template <class T>
    T* take(std::vector<T*>& free) {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !free.empty() || shut_down_; });
        if (shut_down_) return nullptr;
        T* item = free.back();
        free.pop_back();
        return item;
    }
    template <class T>
    void give(std::vector<T*>& free, T* item) {
        {
            std::lock_guard lock(mu_);
            free.push_back(item);
        }
        cv_.notify_all();
    }
    // One attempt; sets `retry` when a worker failed and the job may be retried.
    Verdict attempt(const Job& job, bool& retry);
    nlohmann::json baseline_for(Lane& lane, const Job& job, std::string& error, bool& worker_failed);
    struct LaneRun;
    // Admits the job's memory (all of the device when `alone`), then runs it: the reference listens,
    // the candidate child runs and sends its outputs, the reference returns its comparisons.
    LaneRun run_on_lane(Lane& lane, const Job& job, const JobMemory& need, bool alone, double timeout_s,
                        JobReplies& replies);
    void make_lanes(int n);
    nlohmann::json timing_request_fields() const;
};

}  // namespace kz
