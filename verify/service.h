// Where verdicts come from: the in-process verifier pool (verify/verifier.h, the default) or a farm of
// verifier daemons on Redis streams (verify/farm.h), chosen by URL. Everything that verifies (verify
// --jobs, bench, the trainer's judge) talks to this interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/host.h"
#include "verify/verdict.h"

namespace kz {

class DeviceMemoryBudget;

struct VerifyOptions {
    std::string device = "cpu";  // cpu | cuda | cuda:N
    int trials = 5;
    int timing_iters = 0;  // the most timed iterations of one measurement; 0: the device's
    // Adaptive timing: after min_timing_iters, a measurement stops once its median is known to
    // +-timing_precision (relative half-width of a ~95% interval) or its timed iterations add up
    // to timing_budget_ms. Baselines and candidates are timed alike.
    int min_timing_iters = 10;
    double timing_precision = 0.01;
    double timing_budget_ms = 1000;
    int warmup = 3;
    bool strict = true;
    double timeout_s = 120;  // one candidate run (trials, timing, checks)
    // On a GPU, one forward call of the candidate may take this many times the reference's eager
    // time, and at least the floor; past it the call is taken for hung and its process killed.
    double forward_limit_factor = 1000, forward_limit_floor_s = 2;
    double compile_timeout_s = 900;  // one ahead-of-time build (load_inline takes a minute)
    double min_kernel_share = 0.5;
    double speedup_review_bound = 10.0;
    bool require_custom_kernel = true;  // see AssemblyPolicy
    int compile_baseline = -1;          // -1: the device's (with_device_defaults); 0 off; 1 on
    double atol = 1e-2, rtol = 1e-2;    // fp32 tolerances
    int lanes = 1;                      // reference + candidate worker pairs; 0: auto_lanes()
    int compile_workers = 1;            // 0: as many as lanes
    // Device memory the verifier's jobs may use at once; 0: what is free once its workers are up,
    // less a margin (verify/device_memory.h).
    int64_t device_memory_bytes = 0;
    // Device memory that others in this process hold for good beside the verifier's jobs after it
    // started (the trainer's task validators' contexts; what they allocate they reserve from
    // memory_budget()): left out of the measured capacity.
    int64_t reserved_device_bytes = 0;
    int spare_children = 1;  // warm candidate children kept ready per lane
    int max_attempts = 3;
    std::string cache_dir;                    // build cache and baselines.sqlite; default_cache_dir() if empty
    std::string work_dir;                     // scratch; a fresh directory under /tmp if empty
    std::vector<std::string> worker_command;  // default: {python, "-m", "kernelzero.worker"}
    std::string python_dir;                   // PYTHONPATH for the workers
};

// The defaults, for option parsers that show them.
inline const VerifyOptions kVerifyDefaults{};

struct Job {
    std::string id;
    std::string task_source;
    std::string candidate_source;
    std::string backend;   // cuda | triton
    double timeout_s = 0;  // one candidate run; 0: the verifier's default
};

class VerifyService {
public:
    virtual ~VerifyService() = default;
    // Starts the workers or connects to the farm. Throws std::runtime_error naming the cause.
    virtual void start() = 0;
    // Thread-safe and blocking: one job's verdict (infra_error when the service failed, never a reward).
    virtual Verdict verify(const Job& job) = 0;
    // In-flight verify() calls return infra_error soon. Safe from any thread.
    virtual void shutdown() = 0;
    // The settings verdicts are asked with (a farm's daemons must verify with the same).
    virtual const VerifyOptions& options() const = 0;
    // Seconds each part of start() took, by name (empty where the service does not say).
    virtual nlohmann::json start_stages() const { return nlohmann::json::object(); }
    // The budget this host's device memory is admitted to its jobs through, for others on the device
    // to reserve from too (the trainer's module validators); null before start(), on the CPU and where
    // the jobs run elsewhere (a farm). It lives as long as the service.
    virtual DeviceMemoryBudget* memory_budget() const { return nullptr; }
};

// `o` with the defaults that depend on its device filled in, the one place they are decided:
// timing_iters 0 becomes 100 on CUDA and 10 on the CPU (a forward there takes milliseconds to
// seconds and the host clock needs no long run), compile_baseline -1 becomes on for CUDA and off on
// the CPU (Inductor's C++ build costs a CPU job more than the job itself).
VerifyOptions with_device_defaults(VerifyOptions o);

// Lanes for --workers auto: half the host's cores (a lane is two busy processes), at most 8, and no
// more than one per 16 GiB of device memory (CPU: no device bound).
int auto_lanes(int host_cores, int64_t device_total_bytes);

// "" or "local": the in-process pool with `opts`; "redis://host:port[/db]": the farm at that broker,
// asking for `opts`' settings. Not started. Throws std::invalid_argument for another URL.
std::unique_ptr<VerifyService> make_verify_service(const std::string& url, const VerifyOptions& opts);

}  // namespace kz
