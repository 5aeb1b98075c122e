// Summary of a verify results file (JSONL): counts by status and the spread of per-job latencies.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kz {

struct Spread {
    double median = 0, min = 0, max = 0, p10 = 0, p90 = 0;
    int n = 0;
};

Spread spread_of(std::vector<double> values);

// Where jobs spent their time: one verdict stage (the controller's, e.g. "wait_lane", or the
// candidate child's, "candidate.timing_s") over every job that has it.
struct StageTime {
    double sum_s = 0;
    Spread per_job;
};

struct ResultsSummary {
    int jobs = 0;
    std::map<std::string, int> by_status;
    Spread total_s, compile_s, runtime_ms;
    std::vector<double> speedups;  // speedup_eager of correct verdicts
    std::map<std::string, StageTime> stages;
    // Which candidate child ran each job (`stages.candidate.child`): a fresh one (its first job: it
    // opened a CUDA context for it) or one reused; why children were retired, by reason.
    struct Children {
        int fresh = 0, reused = 0;
        std::map<std::string, int> retired;
    } children;
    nlohmann::json to_json() const;
    // The children line: "F in a fresh child, R in a reused one; retired: reason (n), ...".
    std::string children_line() const;
    // The stages, largest sum first, one per line.
    std::string stage_table() const;
    // What the host could sustain at most, from what the jobs consumed: its `cores` busy with
    // nothing but the candidate children's CPU time and the compile workers' (a compile is
    // single-threaded: its wall time), or the device busy with nothing but timed iterations (the
    // children's exclusive holds of the device lock). Jobs per minute; 0 where a figure is missing.
    struct Ceiling {
        double cpu_s_per_job = 0, cpu_jobs_per_min = 0;
        double exclusive_s_per_job = 0, device_jobs_per_min = 0;
    };
    Ceiling ceiling(int cores) const;
};

// Reads the last verdict of every id (a resumed run may have re-verified infra errors).
ResultsSummary summarize_results(const std::string& path);

}  // namespace kz
