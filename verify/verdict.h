// The verdict of one (task, candidate) pair, in the schema of the design's section 3, and the pure
// function that assembles it from the workers' replies (so every rule is unit-testable).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kz {

enum class Status { correct, incorrect, compile_error, runtime_error, timeout, format_error, rejected, infra_error };

const char* to_string(Status s);
std::optional<Status> status_from_string(const std::string& s);

struct RuntimeStats {
    double median = 0, min = 0, max = 0;
    int n = 0;
};

struct Verdict {
    Status status = Status::infra_error;
    std::string reason;
    int trials_passed = 0, trials_run = 0;
    std::optional<double> max_abs_err, max_rel_err;
    std::optional<RuntimeStats> runtime_ms;
    std::string timing_source;  // cuda_events | host_clock | cpu_interpreter
    std::optional<double> ref_eager_ms, ref_compile_ms, speedup_eager, speedup_compile;
    std::optional<double> custom_kernel_time_fraction;
    std::map<std::string, std::string> checks;  // name -> pass | fail | skip
    bool review = false;                        // speedup above the configured bound
    double compile_s = 0, total_s = 0;
    std::string device, backend, log;
    int attempts = 1;
    nlohmann::json stages = nlohmann::json::object();  // seconds per named stage (controller and child)
    // Device memory: the job's need by process, what was admitted beside it, the candidate's cap and
    // peak, and a first run's failure when it was run again alone (null on the CPU).
    nlohmann::json memory;

    bool correct() const { return status == Status::correct; }
    nlohmann::json to_json() const;
    // to_json()'s object back (a verdict that travelled, e.g. from a farm daemon). Throws
    // std::invalid_argument naming what is missing or malformed.
    static Verdict from_json(const nlohmann::json& j);
};

struct AssemblyPolicy {
    bool strict = true;             // strict: torch compute in forward is rejected unless declared
    double min_kernel_share = 0.5;  // strict, on CUDA: least share of GPU time in the candidate's kernels
    double speedup_review_bound = 10.0;
    // Off only for the harness self-test (bench --model reference), whose candidate is the reference
    // itself: having and launching no kernel of its own is then reported (skip), not rejected.
    bool require_custom_kernel = true;
};

// Everything the workers said about one job. Missing parts are null.
struct JobReplies {
    nlohmann::json compile;   // compile worker: static checks and build
    nlohmann::json run;       // candidate worker: what the child ran, and why it stopped
    nlohmann::json compare;   // reference worker: each output's comparison, as the child sent them
    nlohmann::json baseline;  // cached or fresh reference timings, with the task's memory footprint
    nlohmann::json memory;    // the device memory admitted for the job (see Verdict::memory)
    std::string device;       // "cpu" or "cuda:N"
    std::string backend;
    nlohmann::json stages = nlohmann::json::object();  // controller stage -> seconds
};

// Applies the verification rules in order; never throws on odd replies (they become infra_error).
Verdict assemble_verdict(const JobReplies& r, const AssemblyPolicy& policy);

// A verdict for a failure before any worker could judge the candidate.
Verdict early_verdict(Status s, const std::string& reason, const std::string& device, const std::string& backend);

}  // namespace kz
